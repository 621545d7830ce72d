// decode-probe: llama.cpp's own decode as a probe for the set_rows/graph-reuse fault.
//
// One token at a time, for many tokens, with a KV cache of (default) 256 cells: before each
// token past the first window the oldest position is removed, so the one free cell is the one
// the new token's K/V rows are written to (ggml_set_rows with llama.cpp's own I64 indices) and
// the writes cycle through the cache like the reported ring, while the same decode graph is
// reused token after token (llm_graph_result::can_reuse).
//
// Streams (each its own llama_context, decoding the same tokens at the same positions):
//   probe  the device under test, graph reuse as llama.cpp does it (must be proven: n_reused)
//   same   the same device, graph reuse off (LLAMA_GRAPH_REUSE_DISABLE=1, or LLAMA_SET_ROWS=0 on trees
//          that predate that switch; REUSE_OFF_ENV) (faults of reuse itself: a stale
//          topology or index); its logits and KV rows must be bit-identical to the probe's
//   cpu    only when the probe runs on a GPU: the CPU backend, reuse disabled (faults of the
//          backend's kernels); logits within --cpu-nmse (normalized mean squared error)
//   path   only on the CPU backend, where one of llama.cpp's settings (--flash-attn, a cache type
//          other than f16, --batch-size, --parallel) takes another path than the default decode:
//          the same tokens with flash attention off, an f32 (or f16) cache, token by token, each
//          sequence alone; logits within the settings' stated NMSE, per chunk (a reference must
//          not share the path it checks)
//   good   only with --logits-ref FILE: the logits another tree's probe wrote with --logits-out
//          FILE under the same settings (the orchestrator records them at the bisect's --good
//          commit); within --good-nmse, per chunk. The only reference that does not share a
//          fault every path of this tree has (a wrong mask, a lost hyperparameter), since it
//          was computed by other code
// The settings are llama.cpp's own (common/arg.cpp); a setting this tree cannot express (the
// configure-time API probes) is untestable, naming it; the result's `settings` object states what
// the decode graph computed with (flash attention, cache and weight types) and the model's shape.
// The probe decodes in chunks of --chunk tokens; after each chunk the logits of every token are
// compared, and the KV rows (llama_state_seq_get_data) of probe and same at the chunk's last
// token. Each reference is decoded beside the probe by --ref-workers N contexts (RefPool; default
// from the cores: ref_workers_for): one decodes the whole sequence in order; more decode segments
// that start from an empty memory n_layer * cells tokens early (bit-identical to one sequential
// decode).
//
// Placement (--memory device|unified, the replay's flag): unified memory is ggml's own switch
// (GGML_CUDA_ENABLE_UNIFIED_MEMORY in the environment, or a GGML_HIP_UMA build: the orchestrator
// applies the tree's knob); this program proves where llama.cpp put its buffers, as the replay
// does (placement.h): a twin of the probe context, made with the same model and parameters,
// decodes one token with an eval callback that records the buffer of the KV cache tensor the
// SET_ROWS node writes and of a weight (a MUL_MAT's src0), then is freed before the loop. The
// probe context itself runs without a callback: in ggml-backend.cpp a callback makes every split
// compute a ggml_graph_view (uid 0), which skips ggml-cuda's reuse of a CUDA graph by uid and
// adds a synchronize per split, so it would no longer be the decode a user runs.
//
// Output and exit codes as setrows-replay (repro-kernels/README.md): one SETROWS_RESULT line;
// 0 pass (or `unchecked` with --check none), 1 mismatch (SETROWS_MISMATCH line first),
// 2 usage, 3 untestable here (model not loadable: llama.cpp's own message; a tree that can reuse
// graphs but reused none). A tree that predates graph reuse is checked as it decodes (see the end).
#include "llama.h"
#include "ggml-backend.h"
#include "ggml.h"
#include "placement.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>
#ifdef __linux__
#include <sched.h>
#endif


namespace {

constexpr int EXIT_PASS = 0, EXIT_MISMATCH = 1, EXIT_USAGE = 2, EXIT_UNSUPPORTED = 3;
// The path reference's NMSE thresholds beside a quantized cache (cache_nmse).
constexpr double CACHE_NMSE_Q8 = 5e-3, CACHE_NMSE_Q5 = 0.15, CACHE_NMSE_Q4 = 0.5, CACHE_NMSE_BF16 = 1e-3;

double now_s() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::string json_escape(const std::string & s) {
    std::string o;
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') { o += '\\'; o += (char) c; }
        else if (c == '\n') o += "\\n";
        else if (c < 0x20) { char b[8]; snprintf(b, sizeof b, "\\u%04x", c); o += b; }
        else o += (char) c;
    }
    return o;
}

// ---- llama.cpp's log: kept so an untestable run can quote llama.cpp's own reason ---------------
std::mutex g_log_mu;
std::string g_last_error;
bool g_verbose = false;

void log_cb(ggml_log_level level, const char * text, void *) {
    std::lock_guard<std::mutex> lk(g_log_mu);
    if (level == GGML_LOG_LEVEL_ERROR) {
        std::string t = text;
        while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
        if (!t.empty()) g_last_error = t;
    }
    if (g_verbose || level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN) {
        fputs(text, stderr);
    }
}

struct Args {
    std::string model;
    std::string backend;   // CPU, a device name (CUDA0, ROCm0, Vulkan0...), or empty: first GPU else CPU
    long steps = 10000;
    int cells = 256;
    int chunk = 64;
    int threads = 0;       // per CPU context; 0: one
    int ref_workers = 0;   // contexts per reference; 0: from the hardware (ref_workers_for)
    bool check = true;
    bool cpu_reference = true;  // on a GPU: also decode on the CPU backend
    double cpu_nmse = 1e-4;
    uint64_t seed = 42;
    bool verbose = false;
    std::string memory = "device";  // device | unified (placement.h)
    // llama.cpp's common settings, spelled as common/arg.cpp spells them
    std::string flash_attn;         // "" (not given: off, the probe's decode since it was written) | off | on | auto
    std::string cache_type_k = "f16", cache_type_v = "f16";
    int batch = 1;                  // tokens of each sequence per llama_decode
    int ubatch = 0;                 // tokens of each sequence per ubatch; 0: the batch
    int parallel = 1;               // sequences decoded together, one llama_decode for all
    int n_gpu_layers = -1;          // -1: all
    double path_nmse = -1;          // the path reference's threshold; < 0: from the cache types
    std::string logits_out;         // writes the probe stream's logits here (GoodLogits)
    std::string logits_ref;         // compares them with a file --logits-out wrote (reference `good`)
    double good_nmse = 1e-4;        // the good reference's threshold, per chunk and sequence
};

struct Result {
    std::string status = "usage", message;
    int exit_code = EXIT_USAGE;
    long steps_run = 0;
    long first_failing_step = -1;
    std::string backend = "unknown", device, backend_reg, dev_name, dev_description;
    bool have_device = false;
    std::vector<std::pair<std::string, std::string>> features;
    std::string features_source = "no-device";
    std::string mismatch_json = "null";
    std::string streams_json = "[]";
    long n_cells = -1;
    double load_s = 0, loop_s = 0, check_s = 0, total_s = 0;
    long long model_bytes = -1;
    std::string memory_json = ",\"memory\":null";  // placement.h's object once proven
    std::string settings_json = "null";               // the effective settings (settings_json())
    std::string good_json;                            // ,"good_reference":{...} with --logits-out/-ref
};

std::string json_str_or_null(bool known, const std::string & s) {
    return known ? "\"" + json_escape(s) + "\"" : "null";
}

void print_result(const Result & r) {
    std::string feats = "{";
    for (size_t i = 0; i < r.features.size(); i++) {
        feats += (i ? ",\"" : "\"") + json_escape(r.features[i].first) + "\":\"" + json_escape(r.features[i].second) + "\"";
    }
    feats += "}";
    const double rate = r.loop_s > 0 ? r.steps_run / r.loop_s : 0.0;
    printf("SETROWS_RESULT {\"tool\":\"decode-probe\",\"format\":2,\"status\":\"%s\",\"exit_code\":%d,\"message\":\"%s\","
           "\"backend\":\"%s\",\"device\":\"%s\",\"ggml_version\":\"\",\"ggml_commit\":\"\","
           "\"steps_run\":%ld,\"first_failing_step\":%s,\"kv_cells\":%ld,\"model_bytes\":%lld,"
           "\"features\":%s,\"features_source\":\"%s\",\"backend_reg\":%s,\"device_name\":%s,\"device_description\":%s,"
           "\"settings\":%s,\"streams\":%s,\"mismatch\":%s%s,"
           "\"timings\":{\"total_s\":%.6f,\"build_s\":%.6f,\"compute_s\":%.6f,\"check_s\":%.6f,\"steps_per_s\":%.3f,"
           "\"loop_s\":%.6f,\"loop_steps_per_s\":%.3f}}\n",
           r.status.c_str(), r.exit_code, json_escape(r.message).c_str(), json_escape(r.backend).c_str(),
           json_escape(r.device).c_str(), r.steps_run,
           r.first_failing_step >= 0 ? std::to_string(r.first_failing_step).c_str() : "null", r.n_cells, r.model_bytes,
           feats.c_str(), r.features_source.c_str(), json_str_or_null(r.have_device, r.backend_reg).c_str(),
           json_str_or_null(r.have_device, r.dev_name).c_str(), json_str_or_null(r.have_device, r.dev_description).c_str(),
           r.settings_json.c_str(), r.streams_json.c_str(), r.mismatch_json.c_str(), (r.memory_json + r.good_json).c_str(), r.total_s, r.load_s, r.loop_s - r.check_s, r.check_s, rate,
           r.loop_s, rate);
    fflush(stdout);
}

[[noreturn]] void finish(Result & r, const char * status, int code, const std::string & msg) {
    r.status = status;
    r.exit_code = code;
    r.message = msg;
    if (code != EXIT_PASS) fprintf(stderr, "decode-probe: %s\n", msg.c_str());
    print_result(r);
    exit(code);
}

void usage(Result & r, const std::string & why) {
    fprintf(stderr,
            "usage: decode-probe --model FILE.gguf [--backend CPU|NAME] [--steps N] [--ctx-size N] [--chunk N]\n"
            "                    [--threads N] [--ref-workers N] [--check full|none] [--cpu-reference on|off] [--cpu-nmse X]\n"
            "                    [--seed N] [--memory device|unified] [--verbose]\n"
            "                    [--flash-attn off|on|auto] [--cache-type-k T] [--cache-type-v T] [--batch-size N]\n"
            "                    [--ubatch-size N] [--parallel N] [--n-gpu-layers N|all] [--path-nmse X]\n"
            "                    [--logits-out FILE] [--logits-ref FILE] [--good-nmse X]\n"
            "  T: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl\n");
    finish(r, "usage", EXIT_USAGE, why);
}

// The K/V cache types of llama.cpp's --cache-type-k/-v (common/arg.cpp's kv_cache_types).
const std::pair<const char *, ggml_type> CACHE_TYPES[] = {
    {"f32", GGML_TYPE_F32}, {"f16", GGML_TYPE_F16}, {"bf16", GGML_TYPE_BF16}, {"q8_0", GGML_TYPE_Q8_0},
    {"q4_0", GGML_TYPE_Q4_0}, {"q4_1", GGML_TYPE_Q4_1}, {"q5_0", GGML_TYPE_Q5_0}, {"q5_1", GGML_TYPE_Q5_1},
    {"iq4_nl", GGML_TYPE_IQ4_NL},
};

ggml_type cache_type(const std::string & name) {
    for (const auto & t : CACHE_TYPES) if (name == t.first) return t.second;
    return GGML_TYPE_COUNT;
}

Args parse_args(int argc, char ** argv, Result & r) {
    Args a;
    for (int i = 1; i < argc; i++) {
        std::string k = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) usage(r, k + " needs a value");
            return argv[++i];
        };
        auto num = [&](long lo) -> long {
            std::string v = val();
            char * end = nullptr;
            long n = strtol(v.c_str(), &end, 10);
            if (v.empty() || *end || n < lo) usage(r, k + " " + v + ": expected an integer >= " + std::to_string(lo));
            return n;
        };
        if (k == "--model") a.model = val();
        else if (k == "--backend") a.backend = val();
        else if (k == "--steps") a.steps = num(1);
        else if (k == "--ctx-size" || k == "--cells") a.cells = (int) num(2);
        else if (k == "--chunk") a.chunk = (int) num(1);
        else if (k == "--threads") a.threads = (int) num(0);
        else if (k == "--ref-workers") a.ref_workers = (int) num(1);
        else if (k == "--seed") a.seed = (uint64_t) num(0);
        else if (k == "--cpu-nmse") a.cpu_nmse = atof(val().c_str());
        else if (k == "--path-nmse") a.path_nmse = atof(val().c_str());
        else if (k == "--logits-out") a.logits_out = val();
        else if (k == "--logits-ref") a.logits_ref = val();
        else if (k == "--good-nmse") a.good_nmse = atof(val().c_str());
        else if (k == "--batch-size") a.batch = (int) num(1);
        else if (k == "--ubatch-size") a.ubatch = (int) num(1);
        else if (k == "--parallel") a.parallel = (int) num(1);
        else if (k == "--n-gpu-layers") {
            if (i + 1 < argc && std::string(argv[i + 1]) == "all") { i++; a.n_gpu_layers = -1; }
            else a.n_gpu_layers = (int) num(0);
        } else if (k == "--flash-attn") {
            a.flash_attn = val();
            if (a.flash_attn != "off" && a.flash_attn != "on" && a.flash_attn != "auto")
                usage(r, "--flash-attn " + a.flash_attn + ": expected off, on or auto");
        } else if (k == "--cache-type-k" || k == "--cache-type-v") {
            std::string v = val();
            if (cache_type(v) == GGML_TYPE_COUNT) usage(r, k + " " + v + ": expected f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1 or iq4_nl");
            (k == "--cache-type-k" ? a.cache_type_k : a.cache_type_v) = v;
        } else if (k == "--check") {
            std::string v = val();
            if (v != "full" && v != "none") usage(r, "--check " + v + ": expected full or none");
            a.check = v == "full";
        } else if (k == "--cpu-reference") {
            std::string v = val();
            if (v != "on" && v != "off") usage(r, "--cpu-reference " + v + ": expected on or off");
            a.cpu_reference = v == "on";
        } else if (k == "--memory") {
            a.memory = val();
            // host: llama.cpp puts its KV cache on the device or the CPU only (offload_kqv), so
            // it cannot be asked to keep it in host memory the GPU uses in place
            if (a.memory != "device" && a.memory != "unified")
                usage(r, "--memory " + a.memory + ": expected device or unified (llama.cpp places its KV cache on the device or the CPU only)");
        } else if (k == "--verbose") a.verbose = true;
        else if (k == "--help" || k == "-h") usage(r, "help");
        else usage(r, "unknown argument " + k);
    }
    if (a.model.empty()) usage(r, "--model is required");
    if (a.ubatch == 0) a.ubatch = a.batch;
    if (!a.check && !a.logits_ref.empty()) usage(r, "--logits-ref needs --check full (it is a reference)");
    if (a.ubatch > a.batch) usage(r, "--ubatch-size " + std::to_string(a.ubatch) + " exceeds --batch-size " + std::to_string(a.batch));
    return a;
}

// ---- the good reference: logits another tree's probe recorded ---------------------------------
// --logits-out FILE writes the probe stream's logits; --logits-ref FILE compares with them. The
// file: the magic "DPLOGIT1", u32 n_vocab, u32 sequences, then per token (in order) per sequence
// n_vocab f32 (host order: it is read back on the machine that wrote it). The header holds what
// the two runs must share for their logits to be comparable at all; the model, the settings and
// the steps are the orchestrator's to match (it keys the file by them).
struct GoodLogits {
    FILE * out = nullptr;
    std::vector<float> ref;  // token x sequence x n_vocab
    long ref_tokens = 0;
    int n_vocab = 0, n_seq = 0;
    double nmse_max = 1e-4, nmse_worst = 0;
    long tokens_compared = 0;
};

const char GOOD_MAGIC[8] = {'D', 'P', 'L', 'O', 'G', 'I', 'T', '1'};

// Opens --logits-out; false (err says why) when it cannot be written.
bool good_open_out(GoodLogits & g, const std::string & path, std::string & err) {
    g.out = fopen(path.c_str(), "wb");
    const uint32_t hdr[2] = {(uint32_t) g.n_vocab, (uint32_t) g.n_seq};
    if (!g.out || fwrite(GOOD_MAGIC, 1, 8, g.out) != 8 || fwrite(hdr, sizeof hdr, 1, g.out) != 1) {
        err = "--logits-out " + path + ": cannot write (" + strerror(errno) + ")";
        return false;
    }
    return true;
}

// Reads --logits-ref; false (err says why) when it is not a file --logits-out wrote for this
// vocabulary and these sequences.
bool good_load(GoodLogits & g, const std::string & path, std::string & err) {
    FILE * f = fopen(path.c_str(), "rb");
    if (!f) { err = "--logits-ref " + path + ": cannot open (" + strerror(errno) + ")"; return false; }
    char magic[8];
    uint32_t hdr[2] = {0, 0};
    const bool ok = fread(magic, 1, 8, f) == 8 && memcmp(magic, GOOD_MAGIC, 8) == 0 && fread(hdr, sizeof hdr, 1, f) == 1;
    if (!ok || hdr[0] != (uint32_t) g.n_vocab || hdr[1] != (uint32_t) g.n_seq) {
        fclose(f);
        err = "--logits-ref " + path + ": " + (ok ? "recorded with " + std::to_string(hdr[0]) + " vocab and " + std::to_string(hdr[1]) +
                                                       " sequences, this run has " + std::to_string(g.n_vocab) + " and " + std::to_string(g.n_seq)
                                                 : std::string("not a --logits-out file"));
        return false;
    }
    const size_t row = (size_t) g.n_vocab * g.n_seq;
    std::vector<float> buf(row);
    while (fread(buf.data(), sizeof(float), row, f) == row) {
        g.ref.insert(g.ref.end(), buf.begin(), buf.end());
        g.ref_tokens++;
    }
    fclose(f);
    return true;
}

// The probe's tokens: fixed by the seed, independent of what the model predicts, so a wrong
// logit never changes the inputs that follow it and every stream decodes the same sequence.
llama_token token_at(uint64_t seed, long i, int n_vocab) {
    uint64_t z = seed * 0x9e3779b97f4a7c15ull + (uint64_t) i * 0xbf58476d1ce4e5b9ull + 1;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (llama_token) ((z ^ (z >> 31)) % (uint64_t) n_vocab);
}

// Sequence `seq`'s token at position t: sequence 0 is the probe's single sequence (token_at with
// the seed), the others take their own streams, so parallel sequences decode different tokens.
llama_token seq_token(uint64_t seed, int seq, long t, int n_vocab) {
    return token_at(seed + (uint64_t) seq * 0x632be59bd9b4e019ull, t, n_vocab);
}

// Removes positions [p0, p1) of sequence `seq` (-1, -1: all of it).
bool remove_range(llama_context * ctx, int seq, llama_pos p0, llama_pos p1) {
#if DECODE_HAVE_MEMORY_SEQ_RM
    return llama_memory_seq_rm(llama_get_memory(ctx), seq, p0, p1);
#elif DECODE_HAVE_KV_SELF_SEQ_RM
    return llama_kv_self_seq_rm(ctx, seq, p0, p1);
#elif DECODE_HAVE_KV_CACHE_SEQ_RM
    return llama_kv_cache_seq_rm(ctx, seq, p0, p1);
#else
#error "this llama.cpp has no way to remove a position from the KV cache"
#endif
}

// How a reference turns graph reuse off, by what the tree reads (CMakeLists.txt): its own switch
// (#14986 on); before it, from #14482 on, LLAMA_SET_ROWS=0, since those trees reuse a graph only
// with ggml_set_rows (`can_reuse` asks the cache for it). The reference then writes K/V with
// ggml_cpy into the same cells, so the reference also leaves the probe's set_rows path.
#if DECODE_TREE_REUSE_DISABLE_ENV || !DECODE_TREE_SET_ROWS_ENV
const char * const REUSE_OFF_ENV = "LLAMA_GRAPH_REUSE_DISABLE";
const char * const REUSE_OFF_VALUE = "1";
#else
const char * const REUSE_OFF_ENV = "LLAMA_SET_ROWS";
const char * const REUSE_OFF_VALUE = "0";
#endif

// Sets an environment variable for one scope (a context's construction), then puts it back.
struct EnvFor {
    const char * name;
    bool had = false;
    std::string saved;
    EnvFor(const char * n, const char * value) : name(n) {
        if (!name) return;
        const char * prev = getenv(name);
        had = prev != nullptr;
        saved = had ? prev : "";
        setenv(name, value, 1);
    }
    ~EnvFor() {
        if (!name) return;
        if (had) setenv(name, saved.c_str(), 1); else unsetenv(name);
    }
};

// What every stream decodes: `steps` positions of each sequence, the probe's llama_decode taking
// `batch` positions of every sequence at once; before each such batch [t, e) every stream (also
// a reference that decodes the batch token by token) removes the positions below e - window, so
// each token sees the same cached positions in every stream.
struct Plan {
    long steps = 0;
    int batch = 1;
    int window = 0;   // KV cells per sequence
    int n_vocab = 0;
    uint64_t seed = 0;
};

struct Stream {
    std::string name;   // probe, same, cpu, path
    bool reuse;         // graph reuse allowed (the probe) or disabled (references)
    llama_model * model = nullptr;
    llama_context * ctx = nullptr;
    llama_batch batch{};
    std::vector<int> seqs;            // the sequences it decodes (its context's sequence k is seqs[k])
    bool one_by_one = false;          // decodes the probe's batches token by token (the path reference)
    std::vector<long> lo;             // per sequence: the lowest position its memory may hold
    std::vector<float> logits;        // the probe's: sequence x chunk x n_vocab
    std::vector<std::vector<uint8_t>> kv;  // the probe's llama_state_seq_get_data per sequence at the chunk's last token
    std::string error;                // a failed decode, with llama.cpp's return code
    long decoded = 0;                 // positions decoded (of each of its sequences)
    long ubatches = 0;                // graphs computed: llama.cpp splits a batch into ubatches
    int ubatch = 1;                   // positions of each sequence per ubatch
    Stream(std::string n, bool r) : name(std::move(n)), reuse(r) {}
    int tokens_per_decode(const Plan & g) const { return (one_by_one ? 1 : g.batch) * (int) seqs.size(); }
};

// The whole memory, as after a fresh context: a reference segment starts from an empty memory.
bool clear_memory(Stream & s, long first) {
    for (size_t k = 0; k < s.seqs.size(); k++) {
        if (!remove_range(s.ctx, (int) k, -1, -1)) return false;
        s.lo[k] = first;
    }
    return true;
}

// Decodes the probe's batch starting at t (all of the stream's sequences) on a stream whose memory
// starts at position `first` (0 but for a reference segment), after removing what the probe
// removes before it; `got(k, p, logits)` for each of its tokens. With batch 1 and one sequence
// this is one token: the oldest position removed once the cache is full, then one llama_decode.
template <class Got>
bool decode_span(Stream & s, const Plan & g, long t, Got got) {
    const long e = std::min(g.steps, t + g.batch);
    for (size_t k = 0; k < s.seqs.size(); k++) {
        const long below = e - g.window;
        if (below > s.lo[k]) {
            if (!remove_range(s.ctx, (int) k, (llama_pos) s.lo[k], (llama_pos) below)) {
                s.error = "removing positions " + std::to_string(s.lo[k]) + ".." + std::to_string(below - 1) + " failed";
                return false;
            }
            s.lo[k] = below;
        }
    }
    const long per = s.one_by_one ? 1 : e - t;
    for (long p0 = t; p0 < e; p0 += per) {
        int n = 0;
        for (long p = p0; p < p0 + per; p++) {
            for (size_t k = 0; k < s.seqs.size(); k++, n++) {
                s.batch.token[n] = seq_token(g.seed, s.seqs[k], p, g.n_vocab);
                s.batch.pos[n] = (llama_pos) p;
                s.batch.n_seq_id[n] = 1;
                s.batch.seq_id[n][0] = (llama_seq_id) k;
                s.batch.logits[n] = 1;
            }
        }
        s.batch.n_tokens = n;
        const int rc = llama_decode(s.ctx, s.batch);
        if (rc != 0) {
            s.error = "llama_decode returned " + std::to_string(rc) + " at token " + std::to_string(p0);
            return false;
        }
        s.decoded += per;
        s.ubatches += (per + s.ubatch - 1) / s.ubatch;
        n = 0;
        for (long p = p0; p < p0 + per; p++) {
            for (size_t k = 0; k < s.seqs.size(); k++, n++) got(k, p, llama_get_logits_ith(s.ctx, n));
        }
    }
    return true;
}

void snapshot_kv(llama_context * ctx, int seq, std::vector<uint8_t> & kv) {
    kv.resize(llama_state_seq_get_size(ctx, seq));
    kv.resize(llama_state_seq_get_data(ctx, kv.data(), kv.size(), seq));
}

// Decodes tokens [from, to) on the probe's stream; `keep`: its logits and KV rows, to check.
void run_chunk(Stream & s, const Plan & g, long from, long to, int chunk, bool keep) {
    const int n_vocab = g.n_vocab;
    s.logits.resize((size_t) s.seqs.size() * chunk * n_vocab);
    for (long t = from; t < to; t += g.batch) {
        const bool ok = decode_span(s, g, t, [&](size_t k, long p, const float * l) {
            if (keep) memcpy(&s.logits[((size_t) k * chunk + (p - from)) * n_vocab], l, sizeof(float) * n_vocab);
        });
        if (!ok) return;
    }
    if (keep) {
        s.kv.resize(s.seqs.size());
        for (size_t k = 0; k < s.seqs.size(); k++) snapshot_kv(s.ctx, (int) k, s.kv[k]);
    }
}

// ---- segmented references: one reference kind decoded by several contexts at once -------------
// A reference rebuilds its graph every token, so it decodes ~2.5x slower than the probe; it need
// not be one sequential decode. Once the ring is full, the K/V rows of layer 1 at position p
// depend on token p alone and those of layer l on the rows of layer l-1 in the window
// [p-C+1, p] (C cells), so a context that starts from an empty memory at position s0 and decodes
// n_layer*C tokens holds exactly the rows, and computes exactly the logits, of one that decoded
// from token 0 (every cell full, nothing masked), provided each token lands in the same cell:
// llama.cpp's cell choice depends on the order of operations, not on positions (the oldest
// removed, the search from the freed head), so token p is in cell p mod C for any s0 that is a
// multiple of C. Workers take blocks of tokens in order, each warmed up from the block's start
// minus n_layer*C (or continuing their own previous block), and hand every token's logits and the
// KV rows at every chunk's end to the probe loop, which compares them exactly as a sequential
// reference's (bit-identical, measured: BENCHMARKS.md, "Segmented references").
struct ChunkOut {
    std::vector<float> logits;                 // sequence x chunk x n_vocab
    std::vector<std::vector<uint8_t>> kv;      // per sequence, at the chunk's last token
    long filled = 0, kv_filled = 0;
};

// Segmented (above) where each token is one decode of one sequence; otherwise (a batch, parallel
// sequences) each worker decodes its sequences from the first token to the last, in order.
struct RefPool {
    std::string name;                  // same, cpu, path
    std::vector<Stream *> workers;
    Plan g;
    long block = 0, warmup = 0;
    bool segmented = true;
    bool want_kv = false;              // `same`: its KV rows are compared byte for byte
    int chunk = 0, n_seqs = 1;
    double nmse_max = 0;               // the threshold (cpu, path), stated in the result
    double nmse_worst = 0;             // the largest seen
    std::string desc;                  // what the reference runs, for the result
    std::mutex mu;
    std::condition_variable cv;
    std::map<long, ChunkOut> out;     // by chunk index, until the probe loop takes it
    long next_block = 0, probe_to = 0, warm_decodes = 0;
    std::atomic<bool> stop{false};
    std::string error;
    std::vector<std::thread> threads;
};

// One decoded token of a reference (its context's sequence k at position t) into the chunk it
// belongs to; the KV rows at the chunk's last token.
void ref_deliver(RefPool & P, Stream & s, size_t k, long t, const float * l) {
    const long c = t / P.chunk, c0 = c * P.chunk, c1 = std::min(P.g.steps, c0 + P.chunk);
    std::vector<uint8_t> kv;
    const bool last = t == c1 - 1;
    if (last && P.want_kv) snapshot_kv(s.ctx, (int) k, kv);
    std::lock_guard<std::mutex> lk(P.mu);
    ChunkOut & o = P.out[c];
    o.logits.resize((size_t) P.n_seqs * P.chunk * P.g.n_vocab);
    o.kv.resize(P.n_seqs);
    const int seq = s.seqs[k];
    memcpy(&o.logits[((size_t) seq * P.chunk + (t - c0)) * P.g.n_vocab], l, sizeof(float) * P.g.n_vocab);
    o.filled++;
    if (last && P.want_kv) { o.kv[seq] = std::move(kv); o.kv_filled++; }
    if (o.filled == (c1 - c0) * P.n_seqs && (!P.want_kv || o.kv_filled == P.n_seqs)) P.cv.notify_all();
}

void ref_fail(RefPool & P, Stream & s) {
    std::lock_guard<std::mutex> lk(P.mu);
    if (P.error.empty()) P.error = s.error;
    P.stop = true;
    P.cv.notify_all();
}

void ref_worker(RefPool & P, Stream & s) {
    if (!P.segmented) {
        // A whole decode in order; a chunk's KV rows are read after the decode of its last
        // token (the chunk is a multiple of the probe's batch: its last token ends a batch).
        for (long t = 0; t < P.g.steps && s.error.empty() && !P.stop; t += P.g.batch) {
            if (!decode_span(s, P.g, t, [&](size_t k, long p, const float * l) { ref_deliver(P, s, k, p, l); })) break;
        }
        if (!s.error.empty()) ref_fail(P, s);
        return;
    }
    long next = 0;  // the position this context decodes next
    const long ahead = (long) P.workers.size() * P.block;  // how far past the probe blocks start
    for (;;) {
        long j;
        {
            std::unique_lock<std::mutex> lk(P.mu);
            P.cv.wait(lk, [&] { return P.stop || P.next_block * P.block >= P.g.steps || P.next_block * P.block < P.probe_to + ahead; });
            if (P.stop || P.next_block * P.block >= P.g.steps) return;
            j = P.next_block++;
        }
        const long b0 = j * P.block, b1 = std::min(P.g.steps, b0 + P.block);
        const long start = std::max(0L, b0 - P.warmup);
        if (next < start || next > b0) {  // not its own previous block's continuation
            if (!clear_memory(s, start)) s.error = "clearing the memory failed";
            next = start;
        }
        for (long t = next; t < b1 && s.error.empty() && !P.stop; t++) {
            if (!decode_span(s, P.g, t, [&](size_t k, long p, const float * l) {
                    if (p < b0) { std::lock_guard<std::mutex> lk(P.mu); P.warm_decodes++; return; }
                    ref_deliver(P, s, k, p, l);
                })) break;
            next = t + 1;
        }
        if (!s.error.empty()) { ref_fail(P, s); return; }
    }
}

// The reference's chunk [from, to); false (P.error says why) when a worker failed.
bool take_chunk(RefPool & P, long from, long to, ChunkOut & got) {
    const long c = from / P.chunk;
    std::unique_lock<std::mutex> lk(P.mu);
    P.cv.wait(lk, [&] {
        auto it = P.out.find(c);
        return !P.error.empty() || (it != P.out.end() && it->second.filled == (to - from) * P.n_seqs &&
                                    (!P.want_kv || it->second.kv_filled == P.n_seqs));
    });
    if (!P.error.empty()) return false;
    got = std::move(P.out[c]);
    P.out.erase(c);
    return true;
}

// Workers per reference kind: the cores left beside the probe, shared by the kinds (bounded);
// 1 (one context decoding the whole reference in order, beside the probe) on two cores.
int ref_workers_for(int threads_per_ctx, int n_kinds) {
    int cores = (int) std::thread::hardware_concurrency();
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) cores = CPU_COUNT(&set);
#endif
    const int k = (cores - threads_per_ctx) / std::max(1, n_kinds * threads_per_ctx);
    return std::max(1, std::min(8, k));
}

// ---- the KV state blob: where a difference lies ------------------------------------------------
// llama_state_seq_get_data's layout is llama.cpp's internal one (llama_kv_cache::state_write):
// [a format tag, n_stream u32 (since kv_unified)] cell_count u32, per cell {pos i32, n_seq_id u32, seq ids},
// then v_trans u32, n_layer u32, per layer K {type i32, row bytes u64, rows}, per layer V {type
// i32, row bytes u64, rows} or, transposed, {type i32, elem bytes u32, n_embd_v u32, per
// dimension one element per cell}. It is located by its content (a cell count equal to the cells
// in use, followed by that many single-sequence cells), never assumed; when it cannot be, a
// difference is still reported, by byte offset, without a cell.
struct KvLayout {
    bool ok = false;
    size_t cells_at = 0, data_at = 0;
    uint32_t n_cells = 0;
    std::vector<int32_t> pos_of;  // state order -> position
};

template <class T> bool rd(const std::vector<uint8_t> & b, size_t at, T & v) {
    if (at + sizeof(T) > b.size()) return false;
    memcpy(&v, &b[at], sizeof(T));
    return true;
}

KvLayout kv_layout(const std::vector<uint8_t> & b, uint32_t expect_cells, long last_pos, int seq) {
    // What precedes the cell list differs between trees (a format tag, n_stream): scan for it.
    for (size_t start = 0; start + 4 <= std::min<size_t>(b.size(), 256); start += 4) {
        KvLayout L;
        uint32_t n = 0;
        if (!rd(b, start, n) || n != expect_cells) continue;
        size_t at = start + 4;
        bool good = true;
        for (uint32_t i = 0; i < n && good; i++) {
            int32_t pos; uint32_t nseq; int32_t sid;
            good = rd(b, at, pos) && rd(b, at + 4, nseq) && nseq == 1 && rd(b, at + 8, sid) && sid == seq &&
                   pos <= last_pos && pos > last_pos - (long) expect_cells;
            L.pos_of.push_back(pos);
            at += 12;
        }
        if (!good) continue;
        L.ok = true; L.cells_at = start; L.data_at = at; L.n_cells = n;
        return L;
    }
    return KvLayout{};
}

// "layer L K cell C (pos P) byte B" for a byte offset into the data part, or "" when unknown.
struct KvWhere { std::string text; long cell = -1; long pos = -1; };

KvWhere kv_where(const std::vector<uint8_t> & b, const KvLayout & L, size_t off) {
    KvWhere w;
    if (!L.ok || off < L.data_at) return w;
    uint32_t v_trans, n_layer;
    size_t at = L.data_at;
    if (!rd(b, at, v_trans) || !rd(b, at + 4, n_layer)) return w;
    at += 8;
    auto cell_hit = [&](uint32_t il, const char * kind, size_t idx, size_t in) {
        w.cell = (long) idx;  // cells are listed in cell order; the ring keeps every cell in use
        w.pos = L.pos_of[idx];
        w.text = "layer " + std::to_string(il) + " " + kind + " cell " + std::to_string(idx) + " (pos " +
                 std::to_string(w.pos) + ") byte " + std::to_string(in);
    };
    for (uint32_t il = 0; il < n_layer; il++) {  // K
        uint64_t row; at += 4;
        if (!rd(b, at, row)) return w;
        at += 8;
        const size_t bytes = (size_t) row * L.n_cells;
        if (off < at + bytes) { cell_hit(il, "K", (off - at) / row, (off - at) % row); return w; }
        at += bytes;
    }
    for (uint32_t il = 0; il < n_layer; il++) {  // V
        at += 4;
        if (!v_trans) {
            uint64_t row;
            if (!rd(b, at, row)) return w;
            at += 8;
            const size_t bytes = (size_t) row * L.n_cells;
            if (off < at + bytes) { cell_hit(il, "V", (off - at) / row, (off - at) % row); return w; }
            at += bytes;
        } else {
            uint32_t el, n_embd;
            if (!rd(b, at, el) || !rd(b, at + 4, n_embd)) return w;
            at += 8;
            const size_t bytes = (size_t) el * L.n_cells * n_embd;
            if (off < at + bytes) {
                const size_t i = (off - at) / el;
                cell_hit(il, "V(transposed)", i % L.n_cells, (i / L.n_cells) * el);
                return w;
            }
            at += bytes;
        }
    }
    return w;
}

// The cell holding `pos` in a KV blob, or -1.
long cell_of(const KvLayout & L, long pos) {
    for (size_t i = 0; i < L.pos_of.size(); i++) if (L.pos_of[i] == pos) return (long) i;
    return -1;
}

double nmse(const float * ref, const float * got, int n) {
    double e = 0, z = 0;
    for (int i = 0; i < n; i++) { e += (double) (ref[i] - got[i]) * (ref[i] - got[i]); z += (double) ref[i] * ref[i]; }
    return z > 0 ? e / z : e;
}

void device_facts(Result & r, ggml_backend_dev_t dev) {
    r.have_device = true;
    r.dev_name = ggml_backend_dev_name(dev);
    r.dev_description = ggml_backend_dev_description(dev);
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
    r.backend_reg = reg ? ggml_backend_reg_name(reg) : "";
    auto get_features = reg ? (ggml_backend_get_features_t) ggml_backend_reg_get_proc_address(reg, "ggml_backend_get_features") : nullptr;
    if (!get_features) { r.features_source = "no-proc"; return; }
    r.features_source = "ggml_backend_get_features";
    for (ggml_backend_feature * f = get_features(reg); f && f->name; f++) r.features.emplace_back(f->name, f->value ? f->value : "");
}

// ---- where llama.cpp put its buffers (the twin context's eval callback) --------------------
#if DECODE_HAVE_CB_EVAL
struct PlacementProbe {
    bool kv = false, weights = false;
    std::vector<placement::BufferFacts> bufs;
    // what the graph computes with: the settings the run proves (settings_json)
    bool flash_attn = false;                 // a FLASH_ATTN_EXT node
    std::string k_type, v_type, weight_type; // the K/V cache tensors SET_ROWS writes; a MUL_MAT's weight
};

// Asked once per node before it is computed; records, and always answers "not needed", so the
// twin's splits are computed whole.
bool placement_cb(struct ggml_tensor * t, bool ask, void * user) {
    auto * p = static_cast<PlacementProbe *>(user);
    if (!ask) return true;
    auto add = [&](ggml_tensor * x, const char * what) {
        if (!x || !x->buffer || !x->data) return false;
        placement::BufferFacts b = placement::describe(x->name, "persistent", x->buffer, x->data);
        b.name = std::string(what) + ":" + x->name;
        p->bufs.push_back(b);
        return true;
    };
    if (t->op == GGML_OP_FLASH_ATTN_EXT) p->flash_attn = true;
    if (t->op == GGML_OP_SET_ROWS) {
        const ggml_tensor * dst = t->view_src ? t->view_src : t->src[0];
        const std::string n = dst ? dst->name : "";
        if (p->k_type.empty() && n.rfind("cache_k", 0) == 0) p->k_type = ggml_type_name(dst->type);
        if (p->v_type.empty() && n.rfind("cache_v", 0) == 0) p->v_type = ggml_type_name(dst->type);
    }
    if (!p->kv && t->op == GGML_OP_SET_ROWS) {
        // set_rows returns a view of the destination: the KV cache tensor is its view_src
        p->kv = add(t->view_src ? t->view_src : t->src[0], "kv_cache");
    }
    if (!p->weights && t->op == GGML_OP_MUL_MAT && t->src[0] && t->src[0]->buffer &&
        ggml_backend_buffer_get_usage(t->src[0]->buffer) == GGML_BACKEND_BUFFER_USAGE_WEIGHTS) {
        p->weights = add(t->src[0], "weights");
        if (p->weights) p->weight_type = ggml_type_name(t->src[0]->type);
    }
    return false;
}
#endif

// ---- the settings a run proves ----------------------------------------------------------------
// The model's shape as its file states it (the architecture's own metadata keys, read through
// llama.cpp), for any head size and KV head count.
struct ModelFacts { long n_embd = -1, n_head = -1, n_head_kv = -1, head_dim = -1, sliding_window = 0; };

long meta_long(const llama_model * m, const std::string & key) {
    char buf[128];
    if (llama_model_meta_val_str(m, key.c_str(), buf, sizeof buf) < 0) return -1;
    char * end = nullptr;
    const long v = strtol(buf, &end, 10);
    return end != buf && *end == 0 ? v : -1;
}

ModelFacts model_facts(const llama_model * m) {
    ModelFacts f;
    char arch[64];
    if (llama_model_meta_val_str(m, "general.architecture", arch, sizeof arch) < 0) return f;
    const std::string a = arch;
    f.n_embd = meta_long(m, a + ".embedding_length");
    f.n_head = meta_long(m, a + ".attention.head_count");
    f.n_head_kv = meta_long(m, a + ".attention.head_count_kv");
    if (f.n_head_kv < 0) f.n_head_kv = f.n_head;  // llama.cpp's default when the key is absent
    f.head_dim = meta_long(m, a + ".attention.key_length");
    if (f.head_dim < 0 && f.n_head > 0 && f.n_embd > 0) f.head_dim = f.n_embd / f.n_head;
    f.sliding_window = std::max(0L, meta_long(m, a + ".attention.sliding_window"));  // 0: none
    return f;
}

// The path reference's K/V cache: another path than the probe's (f32 beside a quantized or bf16
// cache, f16 beside f32), the probe's own where it is already the default f16.
ggml_type path_cache_type(ggml_type t) {
    return t == GGML_TYPE_F16 ? GGML_TYPE_F16 : t == GGML_TYPE_F32 ? GGML_TYPE_F16 : GGML_TYPE_F32;
}

// How far a quantized cache may move the logits (NMSE) from an unquantized one: the rounding of
// the cache's block format, measured on the tiny models (README.md, "Settings") with a margin,
// far below what a wrong row or a wrong scale gives (NMSE near 1).
double cache_nmse(ggml_type t) {
    switch (t) {
        case GGML_TYPE_Q8_0: return CACHE_NMSE_Q8;
        case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1: return CACHE_NMSE_Q5;
        case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_IQ4_NL: return CACHE_NMSE_Q4;
        case GGML_TYPE_BF16: return CACHE_NMSE_BF16;
        default: return 0;
    }
}

// The effective settings: what the graph showed (the placement twin) where it can be read, the
// options otherwise; null where neither is known.
struct SettingsOut {
    std::string flash_attn;           // "on" | "off" from the graph; "" unknown
    std::string k_type, v_type;       // from the graph; "" unknown (the options are reported)
    std::string weight_type;          // a MUL_MAT's weight, from the graph
    long n_ctx = -1, window = -1, n_batch = -1, n_ubatch = -1;
    ModelFacts model;
    double path_nmse = -1;
};

std::string settings_json(const Args & a, const SettingsOut & o) {
    auto str = [](const std::string & v) { return v.empty() ? std::string("null") : "\"" + json_escape(v) + "\""; };
    auto num = [](long v) { return v < 0 ? std::string("null") : std::to_string(v); };
    const bool graph_types = !o.k_type.empty() && !o.v_type.empty();
    char nm[64];
    snprintf(nm, sizeof nm, "%.6g", o.path_nmse);
    return std::string("{\"flash_attn\":") + str(o.flash_attn) + ",\"flash_attn_option\":" + str(a.flash_attn) +
           ",\"cache_type_k\":" + str(graph_types ? o.k_type : a.cache_type_k) +
           ",\"cache_type_v\":" + str(graph_types ? o.v_type : a.cache_type_v) +
           ",\"cache_types_from\":\"" + (graph_types ? "graph" : "options") + "\"" +
           ",\"ctx_size\":" + num(o.n_ctx) + ",\"kv_cells_per_seq\":" + num(o.window) +
           ",\"batch_size\":" + std::to_string(a.batch) + ",\"ubatch_size\":" + std::to_string(a.ubatch) +
           ",\"parallel\":" + std::to_string(a.parallel) + ",\"n_batch\":" + num(o.n_batch) + ",\"n_ubatch\":" + num(o.n_ubatch) +
           ",\"n_gpu_layers\":" + (a.n_gpu_layers < 0 ? std::string("\"all\"") : std::to_string(a.n_gpu_layers)) +
           ",\"weight_type\":" + str(o.weight_type) + ",\"head_dim\":" + num(o.model.head_dim) +
           ",\"gqa\":" + (o.model.n_head > 0 && o.model.n_head_kv > 0 ? num(o.model.n_head / o.model.n_head_kv) : "null") +
           ",\"n_head\":" + num(o.model.n_head) + ",\"n_head_kv\":" + num(o.model.n_head_kv) +
           ",\"sliding_window\":" + num(o.model.sliding_window) +
           ",\"path_nmse\":" + (o.path_nmse >= 0 ? std::string(nm) : "null") + "}";
}

}  // namespace

int main(int argc, char ** argv) {
    const double t0 = now_s();
    Result r;
    const Args a = parse_args(argc, argv, r);
    g_verbose = a.verbose;
    llama_log_set(log_cb, nullptr);
    llama_backend_init();
#if DECODE_HAVE_BACKEND_LOAD_ALL
    ggml_backend_load_all();  // backends built as loadable modules (GGML_BACKEND_DL)
#endif

    // ---- the device under test --------------------------------------------------------------
    ggml_backend_dev_t dev = nullptr;
    for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
        ggml_backend_dev_t d = ggml_backend_dev_get(i);
        const bool gpu = ggml_backend_dev_type(d) == GGML_BACKEND_DEVICE_TYPE_GPU;
        if (a.backend.empty() ? gpu && !dev : a.backend == ggml_backend_dev_name(d)) dev = d;
    }
    if (!dev && (a.backend.empty() || a.backend == "CPU")) dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    if (!dev) finish(r, "unsupported", EXIT_UNSUPPORTED, "no device named " + a.backend + " in this build");
    const bool on_cpu = ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_CPU;
    device_facts(r, dev);
    r.backend = on_cpu ? "CPU" : r.dev_name;
    r.device = r.dev_description;
    {
        FILE * f = fopen(a.model.c_str(), "rb");
        if (!f) usage(r, "--model " + a.model + ": cannot open");
        fseek(f, 0, SEEK_END);
        r.model_bytes = ftell(f);
        fclose(f);
    }

    // ---- settings: what this tree can express (configure-time API probes) ------------------------
    const ggml_type type_k = cache_type(a.cache_type_k), type_v = cache_type(a.cache_type_v);
    const int fa = a.flash_attn.empty() || a.flash_attn == "off" ? 0 : a.flash_attn == "on" ? 1 : 2;
    SettingsOut so;
    so.path_nmse = a.path_nmse >= 0 ? a.path_nmse : std::max({a.cpu_nmse, cache_nmse(type_k), cache_nmse(type_v)});
    r.settings_json = settings_json(a, so);
#if !DECODE_HAVE_FLASH_ATTN_TYPE && !DECODE_HAVE_FLASH_ATTN_BOOL
    if (fa != 0) finish(r, "unsupported", EXIT_UNSUPPORTED, "this tree's llama_context_params has no flash_attn_type/flash_attn: --flash-attn " + a.flash_attn + " cannot be set");
#elif !DECODE_HAVE_FLASH_ATTN_TYPE
    if (fa == 2) finish(r, "unsupported", EXIT_UNSUPPORTED, "this tree's llama_context_params has no flash_attn_type: --flash-attn auto cannot be set (its flash_attn is on or off)");
#endif
#if !DECODE_HAVE_TYPE_KV
    if (type_k != GGML_TYPE_F16 || type_v != GGML_TYPE_F16)
        finish(r, "unsupported", EXIT_UNSUPPORTED, "this tree's llama_context_params has no type_k/type_v: --cache-type-k " + a.cache_type_k + " --cache-type-v " + a.cache_type_v + " cannot be set");
#endif

    // ---- models and contexts ----------------------------------------------------------------
    auto load = [&](bool cpu) -> llama_model * {
        llama_model_params mp = llama_model_default_params();
        static ggml_backend_dev_t none[1] = {nullptr};
        static ggml_backend_dev_t one[2] = {nullptr, nullptr};
        one[0] = dev;
#if DECODE_HAVE_DEVICES_PARAM
        mp.devices = cpu ? none : one;
#else
        (void) none; (void) one;
#endif
        mp.n_gpu_layers = cpu ? 0 : a.n_gpu_layers < 0 ? 999 : a.n_gpu_layers;
        llama_model * m = llama_model_load_from_file(a.model.c_str(), mp);
        if (!m) {
            finish(r, "unsupported", EXIT_UNSUPPORTED,
                   "llama.cpp could not load the model: " + (g_last_error.empty() ? std::string("(no message)") : g_last_error));
        }
        return m;
    };
    // References (--check full): `same` always; `cpu` on a GPU; `path` on the CPU backend where a
    // setting takes another path than the default decode (flash attention, a non-f16 cache, a
    // batch, parallel sequences): the same tokens with flash attention off, an f32/f16 cache,
    // token by token, each sequence alone.
    const int n_seq = a.parallel;
    const bool cpu_ref = a.check && !on_cpu && a.cpu_reference;
    const bool path_ref = a.check && on_cpu &&
                          (fa != 0 || type_k != GGML_TYPE_F16 || type_v != GGML_TYPE_F16 || a.batch > 1 || n_seq > 1);
    // A segmented reference needs each token to be one decode of one sequence (its cell argument).
    const bool segmented = a.batch == 1 && n_seq == 1;
    const int n_kinds = (cpu_ref || path_ref) ? 2 : 1;
    const int ref_workers = !a.check ? 0 : !segmented ? 1 : a.ref_workers > 0 ? a.ref_workers : ref_workers_for(a.threads > 0 ? a.threads : 1, n_kinds);
    if (!path_ref) so.path_nmse = -1;  // no path reference: no threshold to state
    r.settings_json = settings_json(a, so);
    std::vector<int> all_seqs;
    for (int k = 0; k < n_seq; k++) all_seqs.push_back(k);
    std::vector<Stream> streams;
    streams.emplace_back("probe", true);
    streams.back().seqs = all_seqs;
    for (int i = 0; i < ref_workers; i++) { streams.emplace_back("same", false); streams.back().seqs = all_seqs; }
    for (int i = 0; cpu_ref && i < ref_workers; i++) { streams.emplace_back("cpu", false); streams.back().seqs = all_seqs; }
    if (path_ref) {
        for (int i = 0; i < (segmented ? ref_workers : n_seq); i++) {
            streams.emplace_back("path", false);
            streams.back().seqs = {segmented ? 0 : i};
            streams.back().one_by_one = true;
        }
    }
    llama_model * model_dev = load(on_cpu);
    llama_model * model_cpu = on_cpu || !a.check || !a.cpu_reference ? model_dev : load(true);
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model_dev));
    if (n_vocab <= 0) finish(r, "unsupported", EXIT_UNSUPPORTED, "the model has no vocabulary size (n_vocab 0)");
    so.model = model_facts(model_dev);
    // One thread per CPU context by default: a 256-dim model gains nothing from more, and
    // OpenMP barriers on a busy machine cost more than the matrix products (measured: 2 threads
    // decoded 10x slower than 1 on the 2-core CI-like machine under load).
    const int n_threads = a.threads > 0 ? a.threads : 1;
    // The parameters of a context; `device`: the device under test (else the CPU backend).
    struct CtxSpec { int fa; ggml_type tk, tv; uint32_t n_ctx, n_batch, n_ubatch, n_seq; };
    auto context_params = [&](bool device, const CtxSpec & c) {
        llama_context_params cp = llama_context_default_params();
        cp.n_ctx = c.n_ctx;
        cp.n_batch = c.n_batch;
        cp.n_ubatch = c.n_ubatch;
        cp.n_seq_max = c.n_seq;
        cp.n_threads = cp.n_threads_batch = n_threads;
        cp.no_perf = false;
#if DECODE_HAVE_FLASH_ATTN_TYPE
        cp.flash_attn_type = c.fa == 1 ? LLAMA_FLASH_ATTN_TYPE_ENABLED : c.fa == 2 ? LLAMA_FLASH_ATTN_TYPE_AUTO : LLAMA_FLASH_ATTN_TYPE_DISABLED;
#elif DECODE_HAVE_FLASH_ATTN_BOOL
        cp.flash_attn = c.fa == 1;
#endif
#if DECODE_HAVE_TYPE_KV
        cp.type_k = c.tk;
        cp.type_v = c.tv;
#endif
        if (!device) { cp.offload_kqv = false; cp.op_offload = false; }
        return cp;
    };
    // The probe's (and its mirrors': same, cpu): llama.cpp's n_batch/n_ubatch count the tokens of
    // all sequences in one llama_decode / ubatch.
    const CtxSpec probe_spec{fa, type_k, type_v, (uint32_t) a.cells, (uint32_t) (a.batch * n_seq), (uint32_t) (a.ubatch * n_seq), (uint32_t) n_seq};
    int window = 0;
    for (auto & s : streams) {
        s.model = s.name == "cpu" ? model_cpu : model_dev;
        const CtxSpec spec = s.name == "path" ? CtxSpec{0, path_cache_type(type_k), path_cache_type(type_v), (uint32_t) window, 1, 1, 1} : probe_spec;
        llama_context_params cp = context_params(s.name != "cpu" && s.name != "path", spec);
        // The switch that turns reuse off is read when a context is made: set for the references only.
        const EnvFor no_reuse(!s.reuse ? REUSE_OFF_ENV : nullptr, REUSE_OFF_VALUE);
        s.ctx = llama_init_from_model(s.model, cp);
        if (!s.ctx) {
            finish(r, "unsupported", EXIT_UNSUPPORTED,
                   "llama.cpp could not create the " + s.name + " context: " + (g_last_error.empty() ? std::string("(no message)") : g_last_error));
        }
        // KV cells per sequence: llama.cpp may round a sequence's share up (n_ctx_seq)
#if DECODE_HAVE_N_CTX_SEQ
        const int cells = (int) llama_n_ctx_seq(s.ctx);
#else
        const int cells = (int) llama_n_ctx(s.ctx) / (int) s.seqs.size();
#endif
        if (s.name == "probe") {
            window = cells;
            so.n_ctx = llama_n_ctx(s.ctx);
            so.window = window;
            so.n_batch = llama_n_batch(s.ctx);
            so.n_ubatch = llama_n_ubatch(s.ctx);
            r.settings_json = settings_json(a, so);
            if (a.batch > window) usage(r, "--batch-size " + std::to_string(a.batch) + " exceeds the " + std::to_string(window) + " KV cells of a sequence");
        } else if (cells != window) {
            finish(r, "unsupported", EXIT_UNSUPPORTED, "the " + s.name + " context got " + std::to_string(cells) + " KV cells per sequence, the probe " + std::to_string(window));
        }
        s.lo.assign(s.seqs.size(), 0);
        s.ubatch = s.name == "path" ? 1 : a.ubatch;
        s.batch = llama_batch_init(s.tokens_per_decode(Plan{a.steps, a.batch, window, n_vocab, a.seed}), 0, 1);
    }
    // ---- placement proof: a twin of the probe context decodes one token, watched -----------------
#if DECODE_HAVE_CB_EVAL
    {
        PlacementProbe pp;
        llama_context_params cp = context_params(true, probe_spec);
        cp.cb_eval = placement_cb;
        cp.cb_eval_user_data = &pp;
        llama_context * twin = llama_init_from_model(model_dev, cp);
        if (!twin) {
            finish(r, "unsupported", EXIT_UNSUPPORTED,
                   "llama.cpp could not create the placement context: " + (g_last_error.empty() ? std::string("(no message)") : g_last_error));
        }
        llama_batch b = llama_batch_init(1, 0, 1);
        b.n_tokens = 1;
        b.token[0] = token_at(a.seed, 0, n_vocab);
        b.pos[0] = 0;
        b.n_seq_id[0] = 1;
        b.seq_id[0][0] = 0;
        b.logits[0] = 1;
        const int rc = llama_decode(twin, b);
        llama_batch_free(b);
        llama_free(twin);
        if (rc != 0) finish(r, "unsupported", EXIT_UNSUPPORTED, "placement context: llama_decode returned " + std::to_string(rc));
        if (!pp.kv || !pp.weights) {
            // From llama.cpp #14285 to #15505 the KV cache is written with ggml_set_rows (and graphs
            // reused) only with LLAMA_SET_ROWS=1 in the environment: say so where the tree reads it.
            const bool set_rows_opt_in = DECODE_TREE_SET_ROWS_ENV && !getenv("LLAMA_SET_ROWS");
            finish(r, "unsupported", EXIT_UNSUPPORTED, std::string("placement: the decode graph showed no ") +
                   (!pp.kv ? "SET_ROWS node writing the KV cache" : "MUL_MAT reading a weight buffer") +
                   (!pp.kv && set_rows_opt_in ? " (this llama.cpp writes it with set_rows only with LLAMA_SET_ROWS=1: --launch-env LLAMA_SET_ROWS=1)" : ""));
        }
        r.memory_json = placement::json(a.memory, pp.bufs, json_escape);
        for (const auto & f : pp.bufs) {
            fprintf(stderr, "decode-probe: memory %s: %s, host %d, pointer %s\n", f.name.c_str(), f.buft.c_str(),
                    (int) f.is_host, f.ptr.kind.empty() ? "(no GPU runtime)" : f.ptr.kind.c_str());
        }
        so.flash_attn = pp.flash_attn ? "on" : "off";
        so.k_type = pp.k_type;
        so.v_type = pp.v_type;
        so.weight_type = pp.weight_type;
        r.settings_json = settings_json(a, so);
        // the run proves its configuration: what was asked is what the graph computes
        if (fa != 2 && pp.flash_attn != (fa == 1)) {
            finish(r, "unsupported", EXIT_UNSUPPORTED, std::string("flash attention was asked ") + (fa == 1 ? "on" : "off") +
                   " but the decode graph " + (pp.flash_attn ? "has a" : "has no") + " FLASH_ATTN_EXT node");
        }
        if (pp.k_type != a.cache_type_k || pp.v_type != a.cache_type_v) {
            finish(r, "unsupported", EXIT_UNSUPPORTED, "the K/V cache was asked " + a.cache_type_k + "/" + a.cache_type_v +
                   " but the decode graph writes " + (pp.k_type.empty() ? "?" : pp.k_type) + "/" + (pp.v_type.empty() ? "?" : pp.v_type));
        }
    }
#endif
    r.n_cells = window;
    r.load_s = now_s() - t0;
    // The check interval is whole batches: a KV snapshot is taken between two decodes.
    const int chunk = (a.chunk + a.batch - 1) / a.batch * a.batch;
    const Plan plan{a.steps, a.batch, window, n_vocab, a.seed};
    // Each reference is a pool of workers (RefPool): one worker decodes the whole sequence in
    // order, as a sequential reference does; more decode segments, warmed up over
    // n_layer * window tokens.
    std::vector<std::unique_ptr<RefPool>> pools;
    if (ref_workers > 0) {
#if DECODE_HAVE_MODEL_N_LAYER
        const long n_layer = llama_model_n_layer(model_dev);
#else
        const long n_layer = llama_n_layer(model_dev);
#endif
        for (const char * kind : {"same", "cpu", "path"}) {
            auto P = std::make_unique<RefPool>();
            P->name = kind;
            for (auto & s : streams) if (s.name == kind) P->workers.push_back(&s);
            if (P->workers.empty()) continue;
            P->g = plan;
            P->segmented = segmented;
            P->warmup = n_layer * window;
            P->block = segmented ? 2 * P->warmup : a.steps;  // warm-up costs at most half a block's decodes
            P->chunk = chunk;
            P->n_seqs = n_seq;
            P->want_kv = P->name == "same";
            P->nmse_max = P->name == "cpu" ? std::max({a.cpu_nmse, cache_nmse(type_k), cache_nmse(type_v)}) : so.path_nmse;
            if (P->name == "path") {
                P->desc = std::string("flash_attn off, cache ") + ggml_type_name(path_cache_type(type_k)) + "/" +
                          ggml_type_name(path_cache_type(type_v)) + ", token by token, each sequence alone";
            }
            pools.push_back(std::move(P));
        }
    }
    fprintf(stderr, "decode-probe: model %s (%lld bytes), %d vocab, device %s (%s), %d KV cells, %zu streams, %d threads, %d workers per reference%s\n",
            a.model.c_str(), r.model_bytes, n_vocab, r.dev_name.c_str(), r.dev_description.c_str(), window, streams.size(), n_threads,
            ref_workers, pools.empty() || !segmented ? "" : (" (segments of " + std::to_string(pools[0]->block) + " tokens after " + std::to_string(pools[0]->warmup) + " warm-up)").c_str());
    fprintf(stderr, "decode-probe: settings %s\n", r.settings_json.c_str());
    GoodLogits good;
    good.n_vocab = n_vocab;
    good.n_seq = n_seq;
    good.nmse_max = a.good_nmse;
    {
        std::string err;
        if (!a.logits_out.empty() && !good_open_out(good, a.logits_out, err)) usage(r, err);
        if (!a.logits_ref.empty() && !good_load(good, a.logits_ref, err)) usage(r, err);
        if (!a.logits_ref.empty() && good.ref_tokens < a.steps)
            usage(r, "--logits-ref " + a.logits_ref + ": holds " + std::to_string(good.ref_tokens) + " tokens, this run decodes " + std::to_string(a.steps));
    }

    // ---- the loop -------------------------------------------------------------------------------
    const double tl = now_s();
    double check_s = 0;
    std::string mismatch;
    auto stop_pools = [&] {
        for (auto & P : pools) { std::lock_guard<std::mutex> lk(P->mu); P->stop = true; P->cv.notify_all(); }
        for (auto & P : pools) for (auto & t : P->threads) t.join();
        for (auto & P : pools) P->threads.clear();
    };
    for (auto & P : pools) for (Stream * w : P->workers) P->threads.emplace_back([&P, w] { ref_worker(*P, *w); });
    std::vector<ChunkOut> taken(pools.size());
    for (long from = 0; from < a.steps && mismatch.empty(); from += chunk) {
        const long to = std::min(a.steps, from + chunk);
        for (auto & P : pools) { std::lock_guard<std::mutex> lk(P->mu); P->probe_to = to; P->cv.notify_all(); }
        run_chunk(streams[0], plan, from, to, chunk, a.check);
        for (size_t i = 0; i < pools.size() && streams[0].error.empty(); i++) {
            if (!take_chunk(*pools[i], from, to, taken[i])) {
                stop_pools();
                finish(r, "unsupported", EXIT_UNSUPPORTED, pools[i]->name + ": " + pools[i]->error + (g_last_error.empty() ? "" : ": " + g_last_error));
            }
        }
        if (!streams[0].error.empty()) {
            stop_pools();
            finish(r, "unsupported", EXIT_UNSUPPORTED, "probe: " + streams[0].error + (g_last_error.empty() ? "" : ": " + g_last_error));
        }
        r.steps_run = to;
        if (good.out) {
            for (long t = from; t < to; t++)
                for (int k = 0; k < n_seq; k++)
                    fwrite(&streams[0].logits[((size_t) k * chunk + (t - from)) * n_vocab], sizeof(float), n_vocab, good.out);
        }
        if (!a.check) continue;
        const double tc = now_s();
        const Stream & p = streams[0];
        const uint32_t in_use = (uint32_t) std::min<long>(to, window);
        std::vector<KvLayout> L;
        for (int k = 0; k < n_seq; k++) L.push_back(kv_layout(p.kv[k], in_use, to - 1, k));
        // a sequence's name in a mismatch, where there are several
        auto seq_tag = [&](int k, bool json) {
            return n_seq == 1 ? std::string() : json ? ",\"seq\":" + std::to_string(k) : " seq=" + std::to_string(k);
        };
        // A logits mismatch at token t of sequence k against reference `ref`, as the line and the
        // object (one format for every reference): the first logit that differs, the chunk's NMSE.
        auto logits_mismatch = [&](long t, int k, const std::string & ref, const float * want, const float * got, double e) {
            int i = 0;
            while (i < n_vocab && want[i] == got[i]) i++;
            if (i == n_vocab) i = 0;
            const long cell = cell_of(L[k], t);
            char buf[512];
            snprintf(buf, sizeof buf, "token=%ld pos=%ld kv_cell=%s reference=%s what=logits index=%d expected=%.9g got=%.9g nmse=%.3g%s",
                     t, t, cell >= 0 ? std::to_string(cell).c_str() : "unknown", ref.c_str(), i, want[i], got[i], e, seq_tag(k, false).c_str());
            mismatch = buf;
            r.first_failing_step = t;
            snprintf(buf, sizeof buf, "{\"token\":%ld,\"pos\":%ld,\"kv_cell\":%s,\"reference\":\"%s\",\"what\":\"logits\",\"index\":%d,\"expected\":%.9g,\"got\":%.9g,\"nmse\":%.6g%s}",
                     t, t, cell >= 0 ? std::to_string(cell).c_str() : "null", ref.c_str(), i, want[i], got[i], e, seq_tag(k, true).c_str());
            r.mismatch_json = buf;
        };
        for (size_t si = 0; si < pools.size() && mismatch.empty(); si++) {
            RefPool & P = *pools[si];
            const ChunkOut & q = taken[si];
            const std::string & q_name = P.name;
            const bool same = q_name == "same";
            // `path` is judged per chunk and sequence (the squared error of all its tokens over their
            // squared logits): one token's logits can be small, and its own NMSE large, while the
            // chunk's is a steady measure of the path's rounding (README.md, "Settings").
            const bool by_chunk = q_name == "path";
            for (int k = 0; k < n_seq && mismatch.empty(); k++) {
                double err = 0, ref = 0, worst_e = -1;
                long worst_t = from;
                for (long t = from; t <= to; t++) {
                    if (t == to && !by_chunk) break;
                    long tt = t;
                    double e = 0;
                    if (t == to) {  // the chunk's verdict, at its worst token
                        e = ref > 0 ? err / ref : err;
                        if (e > P.nmse_worst) P.nmse_worst = e;
                        if (e <= P.nmse_max) break;
                        tt = worst_t;
                    }
                    const size_t at = ((size_t) k * chunk + (tt - from)) * n_vocab;
                    const float * want = &q.logits[at];
                    const float * got = &p.logits[at];
                    if (t < to) {
                        e = nmse(want, got, n_vocab);
                        if (by_chunk) {
                            double z = 0, d = 0;
                            for (int i = 0; i < n_vocab; i++) { d += (double) (want[i] - got[i]) * (want[i] - got[i]); z += (double) want[i] * want[i]; }
                            err += d;
                            ref += z;
                            if (d > worst_e) { worst_e = d; worst_t = t; }
                            continue;
                        }
                        if (!same && e > P.nmse_worst) P.nmse_worst = e;
                        const bool bad = same ? memcmp(want, got, sizeof(float) * n_vocab) != 0 : !(e <= P.nmse_max);
                        if (!bad) continue;
                    }
                    logits_mismatch(tt, k, q_name, want, got, e);
                    break;
                }
            }
            if (!mismatch.empty() || !same) continue;
            // KV rows at the chunk's last token: bit-identical between reuse and no reuse.
            for (int k = 0; k < n_seq && mismatch.empty(); k++) {
                const std::vector<uint8_t> & pkv = p.kv[k], & qkv = q.kv[k];
                const size_t n = std::min(pkv.size(), qkv.size());
                size_t off = 0;
                while (off < n && pkv[off] == qkv[off]) off++;
                if (off == n && pkv.size() == qkv.size()) continue;
                const KvWhere w = kv_where(pkv, L[k], off);
                char buf[512];
                snprintf(buf, sizeof buf, "token=%ld pos=%ld kv_cell=%s reference=same what=kv byte=%zu at=%s%s",
                         to - 1, w.pos >= 0 ? w.pos : to - 1, w.cell >= 0 ? std::to_string(w.cell).c_str() : "unknown", off,
                         w.text.empty() ? "unknown" : w.text.c_str(), seq_tag(k, false).c_str());
                mismatch = buf;
                r.first_failing_step = to - 1;
                snprintf(buf, sizeof buf, "{\"token\":%ld,\"pos\":%ld,\"kv_cell\":%s,\"reference\":\"same\",\"what\":\"kv\",\"byte\":%zu,\"at\":\"%s\"%s}",
                         to - 1, w.pos >= 0 ? w.pos : to - 1, w.cell >= 0 ? std::to_string(w.cell).c_str() : "null", off, json_escape(w.text).c_str(),
                         seq_tag(k, true).c_str());
                r.mismatch_json = buf;
            }
        }
        // The good reference: per chunk and sequence, as `path` (its code is another tree's, so
        // its rounding differs from this tree's by whatever the commits between changed).
        for (int k = 0; k < n_seq && mismatch.empty() && !good.ref.empty(); k++) {
            double err = 0, z = 0, worst_d = -1;
            long worst_t = from;
            for (long t = from; t < to; t++) {
                const float * want = &good.ref[((size_t) t * n_seq + k) * n_vocab];
                const float * got = &p.logits[((size_t) k * chunk + (t - from)) * n_vocab];
                double d = 0;
                for (int i = 0; i < n_vocab; i++) { d += (double) (want[i] - got[i]) * (want[i] - got[i]); z += (double) want[i] * want[i]; }
                err += d;
                if (d > worst_d) { worst_d = d; worst_t = t; }
            }
            good.tokens_compared += k == 0 ? to - from : 0;
            const double e = z > 0 ? err / z : err;
            if (e > good.nmse_worst) good.nmse_worst = e;
            if (e <= good.nmse_max) continue;
            const long t = worst_t;
            logits_mismatch(t, k, "good", &good.ref[((size_t) t * n_seq + k) * n_vocab],
                            &p.logits[((size_t) k * chunk + (t - from)) * n_vocab], e);
        }
        check_s += now_s() - tc;
    }
    stop_pools();
    if (good.out && fclose(good.out) != 0) finish(r, "unsupported", EXIT_UNSUPPORTED, "--logits-out " + a.logits_out + ": cannot write (" + strerror(errno) + ")");
    good.out = nullptr;
    if (!a.logits_out.empty() || !good.ref.empty()) {
        char buf[256];
        snprintf(buf, sizeof buf, ",\"good_reference\":{\"recorded\":%s,\"compared\":%s,\"tokens\":%ld,\"nmse_threshold\":%.6g,\"nmse_worst\":%.6g}",
                 a.logits_out.empty() ? "false" : "true", good.ref.empty() ? "false" : "true", good.tokens_compared, good.nmse_max, good.nmse_worst);
        r.good_json = buf;
    }
    r.loop_s = now_s() - tl;
    r.check_s = check_s;

    // ---- proof that the graph was reused (and that the references did not reuse) -------------
    std::string sj = "[";
    long probe_reused = -1;
    bool refs_reused = false;
    // One entry per stream kind: a reference's workers summed (decodes include their warm-ups).
    for (size_t i = 0; i < streams.size(); i++) {
        const Stream & s = streams[i];
        if (i > 0 && streams[i - 1].name == s.name) continue;
        long decoded = 0, reused = 0, workers = 0, warm = 0, ubatches = 0;
        for (size_t k = i; k < streams.size() && streams[k].name == s.name; k++, workers++) {
            decoded += streams[k].decoded;
            ubatches += streams[k].ubatches;
#if DECODE_HAVE_PERF_N_REUSED
            const llama_perf_context_data d = llama_perf_context(streams[k].ctx);
            reused = reused < 0 ? reused : reused + d.n_reused;
#else
            reused = -1;
#endif
        }
        std::string judged;  // an NMSE-judged reference: its threshold, the worst seen, its path
        for (auto & P : pools) {
            if (P->name != s.name) continue;
            warm = P->warm_decodes;
            if (P->name == "same") continue;
            char buf[128];
            snprintf(buf, sizeof buf, ",\"nmse_threshold\":%.6g,\"nmse_worst\":%.6g", P->nmse_max, P->nmse_worst);
            judged = buf + (P->desc.empty() ? std::string() : ",\"path\":\"" + json_escape(P->desc) + "\"");
        }
        if (i == 0) probe_reused = reused;
        else refs_reused = refs_reused || reused > 0;
        sj += (i ? "," : "") + std::string("{\"name\":\"") + s.name + "\",\"reuse\":" + (s.reuse ? "true" : "false") +
              ",\"decodes\":" + std::to_string(decoded) + ",\"graphs_reused\":" + (reused >= 0 ? std::to_string(reused) : "null") +
              ",\"graphs_built\":" + (reused >= 0 ? std::to_string(ubatches - reused) : "null") +
              (ubatches != decoded ? ",\"ubatches\":" + std::to_string(ubatches) : std::string()) +
              ",\"backend\":\"" + (s.name == "cpu" || s.name == "path" || on_cpu ? "CPU" : json_escape(r.dev_name)) + "\"" +
              (i ? ",\"workers\":" + std::to_string(workers) + ",\"warmup_decodes\":" + std::to_string(warm) : std::string()) + judged + "}";
    }
    r.streams_json = sj + "]";
    r.total_s = now_s() - t0;
    fprintf(stderr, "decode-probe: %ld tokens in %.3f s (%.1f tokens/s, checks %.3f s), graphs reused by the probe: %ld\n",
            r.steps_run, r.loop_s, r.steps_run / std::max(1e-9, r.loop_s), check_s, probe_reused);

    if (!mismatch.empty()) {
        printf("SETROWS_MISMATCH %s\n", mismatch.c_str());
        finish(r, "fail", EXIT_MISMATCH, "first difference: " + mismatch);
    }
    // A tree without n_reused predates graph reuse (llama.cpp #14482 added both): every decode
    // builds its graph, so the decode checked is the one its users run, and a fault that needs
    // reuse cannot be there. That is the old behaviour of a bisect across #14482, not a
    // reason to skip the tree; the `same` reference then decodes the probe's path and checks
    // only that the decode is repeatable, which the message says.
    const bool predates_reuse = probe_reused < 0;
    if (probe_reused == 0) {
        finish(r, "unsupported", EXIT_UNSUPPORTED,
               "no graph reuse to test: the probe context reused no graph in " + std::to_string(r.steps_run) +
                   " decodes (LLAMA_GRAPH_REUSE_DISABLE set, or this llama.cpp cannot reuse this graph)");
    }
    if (refs_reused) finish(r, "unsupported", EXIT_UNSUPPORTED, std::string("a reference context reused graphs although ") + REUSE_OFF_ENV + "=" + REUSE_OFF_VALUE + " was set for it");
    if (!a.check) {
        finish(r, "unchecked", EXIT_PASS, "decoded " + std::to_string(r.steps_run) + " tokens without references (--check none)");
    }
    finish(r, "pass", EXIT_PASS,
           predates_reuse ? "every token's logits and the KV rows at every chunk's end matched the references; this llama.cpp "
                            "predates graph reuse (no n_reused): every graph was built, as its users' decode builds it"
                          : "every token's logits and the KV rows at every chunk's end matched the references");
}
