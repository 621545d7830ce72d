// setrows-replay: replays the cached single-token decode graph of Luce-Org/lucebox#516 against
// ggml's public API and checks every write and every downstream read against a host model.
//
// Why this shape: the upstream report re-executes ONE allocated graph many times, changing only
// input tensors (row indices, source rows) with ggml_backend_tensor_set, while several
// ggml_set_rows nodes write in place into persistent buffers that later nodes of the same graph
// read. A test that builds a fresh graph per step (the upstream workaround, --mode rebuild) or
// that never checks the downstream reads cannot see that bug, so both are explicit here.
//
// Why the check is one read: the state a check needs (every ring, every downstream output) lives
// in ONE backend buffer laid out by this program (the graph's outputs are placed there before the
// graph allocator runs), so a check is one device-to-host copy of that buffer into pinned host
// memory and a host comparison against the host model; twelve small synchronous reads per check
// cost as much as the step itself on an H200. `--check-every 0` is the bare loop: the identical
// graph, inputs and placement, nothing read back or modelled, so its step rate is the baseline a
// checked run is measured against (the `graph` key of the result line proves it is the same graph).
//
// Why the inputs live in a buffer of their own: each step changes the source rows and the row
// indices through ggml_backend_tensor_set, as the upstream engine does, but each set is one
// synchronous copy; sixteen of them per step made the replay three times slower than a plain
// cached-graph loop. The generic graph uploads three tensors a step (source rows, i64 row
// indices, i32 gather positions; per-buffer views of them feed the graph), the ds4 graph the
// engine's own per-step uploads; constant inputs are set once (no allocator recycles them).
//
// `--engine ds4` replays lucebox's deepseek4 decode attention (53859c26) as far as set_rows and its
// readers go: shapes, types, index arithmetic and node order of the engine (see matrix.toml
// [params.decode-ds4]). `--memory device|host|unified` places the persistent buffers and the
// downstream outputs (placement.h says why and how it is proven).
//
// Exit codes: 0 pass (or, with --check-every 0, "unchecked": nothing was checked), 1 mismatch
// (first difference printed), 2 usage error, 3 the backend or this ggml revision cannot run the
// requested op/type (reported, not crashed). Aborts and GPU faults are NOT caught: they stay
// signals so the orchestrator classifies them.
// The last line on stdout is always `SETROWS_RESULT {json}` when the process exits normally.

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "placement.h"

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cinttypes>
#include <strings.h>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#ifndef SETROWS_HAVE_SET_ROWS
#define SETROWS_HAVE_SET_ROWS 0
#endif
#ifndef SETROWS_HAVE_BACKEND_FEATURES
#define SETROWS_HAVE_BACKEND_FEATURES 0
#endif
#ifndef SETROWS_HAVE_DEV_PROPS_DEVICE_ID
#define SETROWS_HAVE_DEV_PROPS_DEVICE_ID 0
#endif

namespace {

enum Exit { EXIT_PASS = 0, EXIT_MISMATCH = 1, EXIT_USAGE = 2, EXIT_UNSUPPORTED = 3 };

struct Params {
    std::string mode = "reuse";
    std::string backend;  // empty: first GPU, else CPU
    int64_t steps = 2000;
    int64_t wraps = -1;
    int64_t ring_rows = 64;
    int64_t width = 128;
    std::string dst_type = "f32";
    std::string index_type = "i64";
    int64_t start_row = 0;
    int buffers = 4;
    uint64_t seed = 1;
    int64_t check_every = 1;
    std::string read_via = "dst";
    std::string inject = "none";
    int64_t inject_step = -1;
    int ratio = 4;
    std::string memory = "device";   // device | host | unified (placement.h)
    std::string engine = "generic";  // generic | ds4
    int64_t comp_rows = -1;          // comp_cache rows (-1: generic ring_rows/ratio, ds4 1040)
    int cpu_threads = 0;             // 0: ggml's default; a tiny graph on a loaded host wants 1
};

std::string json_escape(const std::string & s) {
    std::string o;
    for (char c : s) {
        switch (c) {
            case '"': o += "\\\""; break;
            case '\\': o += "\\\\"; break;
            case '\n': o += "\\n"; break;
            case '\t': o += "\\t"; break;
            default:
                if ((unsigned char) c < 0x20) {
                    char buf[8];
                    snprintf(buf, sizeof buf, "\\u%04x", c);
                    o += buf;
                } else {
                    o += c;
                }
        }
    }
    return o;
}

// Everything the final line reports; filled as the run progresses so every exit path prints it.
struct Result {
    Params p;
    std::string status = "usage";
    std::string message;
    std::string backend_name = "";
    std::string device_name = "";
    // What the backend itself says about the build and device that ran (format 2). Nothing here is
    // inferred from flags: a key the backend does not report stays empty/null.
    bool have_device = false;
    std::string dev_name, dev_description, backend_reg;
    std::string dev_id;  // PCI bus id from ggml_backend_dev_props (newer ggml), empty when unknown
    std::vector<std::pair<std::string, std::string>> features;
    std::string features_source = "no-device";  // ggml_backend_get_features | no-proc | no-api | no-device
    int64_t steps_run = 0;
    int64_t checks_run = 0;
    int64_t first_failing_step = -1;
    // What was computed, for comparing runs: node count and a hash over every node's op, type,
    // shape, flags and place in its buffer (same graph and placement <=> same fingerprint).
    int graph_nodes = -1;
    std::string graph_fingerprint;
    double total_s = 0, compute_s = 0, check_s = 0, build_s = 0;
    double loop_s = 0;  // the step loop alone (no device init, no first build): what a rate compares
    int uploads_per_step = 0;                       // ggml_backend_tensor_set calls in one step
    std::vector<placement::BufferFacts> placement;  // every buffer the replay allocated
    bool placed = false;                            // the buffers exist (else "memory" is null)
};

std::string ggml_version_str() {
#if SETROWS_HAVE_GGML_VERSION
    return ggml_version();
#else
    return "unknown";
#endif
}

std::string ggml_commit_str() {
#if SETROWS_HAVE_GGML_VERSION
    return ggml_commit();
#else
    return "unknown";
#endif
}

std::string json_str_or_null(bool known, const std::string & s) {
    return known ? "\"" + json_escape(s) + "\"" : std::string("null");
}

const std::string * feature(const Result & r, const char * name) {
    for (const auto & kv : r.features) {
        if (kv.first == name) return &kv.second;
    }
    return nullptr;
}

// The format-2 keys: the backend's own facts about what ran.
std::string backend_facts_json(const Result & r) {
    std::string o = ",\"features\":{";
    for (size_t i = 0; i < r.features.size(); i++) {
        o += (i ? "," : "") + std::string("\"") + json_escape(r.features[i].first) + "\":\"" +
             json_escape(r.features[i].second) + "\"";
    }
    o += "},\"features_source\":\"" + r.features_source + "\"";
    o += ",\"backend_reg\":" + json_str_or_null(r.have_device, r.backend_reg);
    o += ",\"device_name\":" + json_str_or_null(r.have_device, r.dev_name);
    o += ",\"device_description\":" + json_str_or_null(r.have_device, r.dev_description);
    o += ",\"device_id\":" + json_str_or_null(!r.dev_id.empty(), r.dev_id);
    // ggml's public API has no device-architecture or wave-size query; the CUDA backend's ARCHS
    // feature is the list the library was COMPILED for (__CUDA_ARCH_LIST__), not the device's.
    const std::string * archs = feature(r, "ARCHS");
    o += ",\"compiled_archs\":" + json_str_or_null(archs != nullptr, archs ? *archs : "");
    o += ",\"arch\":null,\"wave_size\":null";
    return o;
}

void collect_backend_facts(Result & r, ggml_backend_dev_t dev) {
    r.have_device = true;
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
    r.backend_reg = reg ? ggml_backend_reg_name(reg) : "";
    r.dev_name = ggml_backend_dev_name(dev);
    r.dev_description = ggml_backend_dev_description(dev) ? ggml_backend_dev_description(dev) : "";
#if SETROWS_HAVE_DEV_PROPS_DEVICE_ID
    ggml_backend_dev_props props;
    memset(&props, 0, sizeof props);
    ggml_backend_dev_get_props(dev, &props);
    if (props.device_id) r.dev_id = props.device_id;
#endif
#if SETROWS_HAVE_BACKEND_FEATURES
    ggml_backend_get_features_t get_features =
        reg ? (ggml_backend_get_features_t) ggml_backend_reg_get_proc_address(reg, "ggml_backend_get_features") : nullptr;
    if (!get_features) {
        r.features_source = "no-proc";
        return;
    }
    r.features_source = "ggml_backend_get_features";
    for (ggml_backend_feature * f = get_features(reg); f && f->name; f++) {
        r.features.emplace_back(f->name, f->value ? f->value : "");
    }
#else
    r.features_source = "no-api";
#endif
}

[[noreturn]] void finish(const Result & r, int code) {
    const Params & p = r.p;
    double sps = r.total_s > 0 ? double(r.steps_run) / r.total_s : 0.0;
    const std::string facts = backend_facts_json(r);
    const std::string mem = r.placed ? placement::json(p.memory, r.placement, json_escape) : std::string(",\"memory\":null");
    printf("SETROWS_RESULT {\"tool\":\"setrows-replay\",\"format\":2,\"status\":\"%s\",\"exit_code\":%d,"
           "\"message\":\"%s\",\"backend\":\"%s\",\"device\":\"%s\",\"ggml_version\":\"%s\",\"ggml_commit\":\"%s\","
           "\"params\":{\"mode\":\"%s\",\"steps\":%" PRId64 ",\"ring_rows\":%" PRId64 ",\"width\":%" PRId64
           ",\"dst_type\":\"%s\",\"index_type\":\"%s\",\"start_row\":%" PRId64 ",\"buffers\":%d,\"seed\":%" PRIu64
           ",\"check_every\":%" PRId64 ",\"read_via\":\"%s\",\"inject\":\"%s\",\"inject_step\":%" PRId64
           ",\"engine\":\"%s\",\"memory\":\"%s\",\"comp_rows\":%" PRId64 "},\"uploads_per_step\":%d,"
           "\"steps_run\":%" PRId64 ",\"checks_run\":%" PRId64 ",\"first_failing_step\":%s,"
           "\"graph\":{\"nodes\":%d,\"fingerprint\":%s},"
           "\"timings\":{\"total_s\":%.6f,\"build_s\":%.6f,\"compute_s\":%.6f,\"check_s\":%.6f,\"steps_per_s\":%.2f,"
           "\"loop_s\":%.6f,\"loop_steps_per_s\":%.2f}%s%s}\n",
           r.status.c_str(), code, json_escape(r.message).c_str(), json_escape(r.backend_name).c_str(),
           json_escape(r.device_name).c_str(), json_escape(ggml_version_str()).c_str(),
           json_escape(ggml_commit_str()).c_str(), json_escape(p.mode).c_str(), p.steps, p.ring_rows, p.width, json_escape(p.dst_type).c_str(),
           json_escape(p.index_type).c_str(), p.start_row, p.buffers, p.seed, p.check_every,
           json_escape(p.read_via).c_str(), json_escape(p.inject).c_str(),
           p.inject_step, json_escape(p.engine).c_str(), json_escape(p.memory).c_str(), p.comp_rows, r.uploads_per_step,
           r.steps_run, r.checks_run,
           r.first_failing_step < 0 ? "null" : std::to_string(r.first_failing_step).c_str(), r.graph_nodes,
           json_str_or_null(!r.graph_fingerprint.empty(), r.graph_fingerprint).c_str(), r.total_s, r.build_s,
           r.compute_s, r.check_s, sps, r.loop_s, r.loop_s > 0 ? double(r.steps_run) / r.loop_s : 0.0, facts.c_str(),
           mem.c_str());
    fflush(stdout);
    exit(code);
}

[[noreturn]] void usage_error(Result & r, const std::string & msg) {
    fprintf(stderr, "setrows-replay: usage error: %s\n", msg.c_str());
    fprintf(stderr,
            "usage: setrows-replay [--mode reuse|rebuild] [--backend NAME] [--steps N | --wraps K] [--ring-rows R]\n"
            "       [--width W] [--dst-type f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1] [--index-type i64|i32]\n"
            "       [--start-row S] [--buffers 1..4] [--seed N] [--check-every K (0: bare loop)] [--read-via dst|result]\n"
            "       [--inject none|corrupt|skip-write|stale-read] [--inject-step N]\n"
            "       [--engine generic|ds4] [--memory device|host|unified] [--comp-rows N] [--cpu-threads N]\n");
    r.status = "usage";
    r.message = msg;
    finish(r, EXIT_USAGE);
}

[[noreturn]] void unsupported(Result & r, const std::string & msg) {
    fprintf(stderr, "setrows-replay: unsupported: %s\n", msg.c_str());
    r.status = "unsupported";
    r.message = msg;
    finish(r, EXIT_UNSUPPORTED);
}

bool parse_i64(const char * s, int64_t & out) {
    char * end = nullptr;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0') {
        return false;
    }
    out = v;
    return true;
}

void parse_args(int argc, char ** argv, Result & r) {
    Params & p = r.p;
    bool steps_given = false;
    std::vector<std::string> generic_only;  // flags that shape the generic graph only
    bool width_given = false, ring_given = false;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            usage_error(r, "help requested");
        }
        if (i + 1 >= argc) {
            usage_error(r, "flag " + a + " needs a value (or is unknown)");
        }
        const char * v = argv[++i];
        int64_t n = 0;
        auto num = [&](int64_t lo, int64_t hi) {
            if (!parse_i64(v, n) || n < lo || n > hi) {
                usage_error(r, "flag " + a + ": '" + v + "' is not an integer in [" + std::to_string(lo) + ", " +
                                   std::to_string(hi) + "]");
            }
            return n;
        };
        if (a == "--mode") {
            p.mode = v;
            if (p.mode != "reuse" && p.mode != "rebuild") usage_error(r, "--mode must be reuse or rebuild");
        } else if (a == "--backend") {
            p.backend = v;
        } else if (a == "--steps") {
            p.steps = num(1, INT64_C(1) << 40);
            steps_given = true;
        } else if (a == "--wraps") {
            p.wraps = num(1, INT64_C(1) << 30);
        } else if (a == "--ring-rows") {
            p.ring_rows = num(1, INT64_C(1) << 31);
            ring_given = true;
        } else if (a == "--width") {
            p.width = num(1, INT64_C(1) << 24);
            width_given = true;
        } else if (a == "--dst-type") {
            generic_only.push_back(a);
            p.dst_type = v;
        } else if (a == "--index-type") {
            generic_only.push_back(a);
            p.index_type = v;
            if (p.index_type != "i64" && p.index_type != "i32") usage_error(r, "--index-type must be i64 or i32");
        } else if (a == "--start-row") {
            p.start_row = num(0, INT64_C(1) << 62);
        } else if (a == "--buffers") {
            generic_only.push_back(a);
            p.buffers = (int) num(1, 4);
        } else if (a == "--seed") {
            p.seed = (uint64_t) num(0, INT64_MAX);
        } else if (a == "--check-every") {
            p.check_every = num(0, INT64_C(1) << 40);
        } else if (a == "--read-via") {
            generic_only.push_back(a);
            p.read_via = v;
            if (p.read_via != "dst" && p.read_via != "result") usage_error(r, "--read-via must be dst or result");
        } else if (a == "--inject") {
            p.inject = v;
            if (p.inject != "none" && p.inject != "corrupt" && p.inject != "skip-write" && p.inject != "stale-read")
                usage_error(r, "--inject must be none, corrupt, skip-write or stale-read");
        } else if (a == "--inject-step") {
            p.inject_step = num(0, INT64_C(1) << 40);
        } else if (a == "--engine") {
            p.engine = v;
            if (p.engine != "generic" && p.engine != "ds4") usage_error(r, "--engine must be generic or ds4");
        } else if (a == "--memory") {
            p.memory = v;
            if (p.memory != "device" && p.memory != "host" && p.memory != "unified")
                usage_error(r, "--memory must be device, host or unified");
        } else if (a == "--cpu-threads") {
            p.cpu_threads = (int) num(1, 1024);
        } else if (a == "--comp-rows") {
            p.comp_rows = num(1, INT64_C(1) << 31);
        } else {
            usage_error(r, "unknown flag " + a);
        }
    }
    if (p.engine == "ds4" && !generic_only.empty())
        usage_error(r, generic_only[0] + " shapes the generic graph; --engine ds4 has the engine's own types, "
                                         "indices and reads");
    if (p.engine == "ds4") {  // the engine's head_dim and n_swa (deepseek4_loader.cpp:301,311)
        if (!width_given) p.width = 512;
        if (!ring_given) p.ring_rows = 128;
    }
    if (p.comp_rows < 0) p.comp_rows = p.engine == "ds4" ? 4096 / p.ratio + 16 : std::max<int64_t>(1, p.ring_rows / p.ratio);
    if (p.wraps > 0) {
        if (steps_given) usage_error(r, "--steps and --wraps are exclusive");
        p.steps = p.wraps * p.ring_rows;
    }
    if (p.inject != "none" && p.inject_step < 0) p.inject_step = p.steps / 2;
    if (p.inject != "none" && p.inject_step >= p.steps) usage_error(r, "--inject-step must be < steps");
    if (p.inject != "none" && p.check_every == 0)
        usage_error(r, "--inject needs checking: --check-every 0 is the bare loop, which checks nothing");
}

// ---- values: unique per (seed, buffer, step, column), exact in f16 and bf16 --------------------

uint64_t splitmix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// A multiple of 1/16 in [-7.9375, 7.9375]: after *2+0.5 it is a multiple of 1/8 below 16.5 in
// magnitude, 8 significant bits at most, so f16 and bf16 store it exactly and sums are exact.
float input_value(uint64_t seed, int buf, int64_t tag, int64_t col) {
    uint64_t h = splitmix(seed ^ splitmix((uint64_t) buf * 0x1000193ULL ^ splitmix((uint64_t) tag) ^ ((uint64_t) col << 1)));
    return (float) ((int) (h % 255) - 127) / 16.0f;
}

const float kScale = 2.0f;
#if SETROWS_HAVE_SCALE_BIAS
const float kBias = 0.5f;
#else
const float kBias = 0.0f;
#endif

struct TypeInfo {
    ggml_type type;
    bool exact;
    float levels;  // tolerance = (block range) / levels, for quantized types
    bool asymmetric;
};

bool type_info(const std::string & name, TypeInfo & ti) {
    struct Row { const char * n; ggml_type t; bool exact; float levels; bool asym; };
    static const Row rows[] = {
        {"f32", GGML_TYPE_F32, true, 0, false},   {"f16", GGML_TYPE_F16, true, 0, false},
        {"bf16", GGML_TYPE_BF16, true, 0, false}, {"q8_0", GGML_TYPE_Q8_0, false, 127, false},
        {"q4_0", GGML_TYPE_Q4_0, false, 8, false}, {"q4_1", GGML_TYPE_Q4_1, false, 15, true},
        {"q5_0", GGML_TYPE_Q5_0, false, 16, false}, {"q5_1", GGML_TYPE_Q5_1, false, 31, true},
    };
    for (const Row & r : rows) {
        if (name == r.n) {
            ti = {r.t, r.exact, r.levels, r.asym};
            return true;
        }
    }
    return false;
}

// One persistent destination, as in the upstream graph, and the host model of its contents.
struct Buffer {
    const char * name;
    int64_t nrows;
    int64_t width;
    TypeInfo ti;
    int index_group;  // buffers in one group share their index tensor (state_kv / state_score)
    // The downstream reads of this buffer that the graph computes and the check compares: the
    // sum of every row after this step's write, or before it (a read ordered before the write, as
    // the ds4 engine reads its raw ring), and the written row gathered back (generic graph).
    enum Sums { SUMS_NONE, SUMS_AFTER, SUMS_BEFORE } sums = SUMS_AFTER;
    bool row_out = true;
    size_t rs = 0;  // bytes per row
    ggml_tensor * dst = nullptr;
    std::vector<float> expect;  // what each row must dequantize to (host quantizer round trip)
    std::vector<float> tol;     // per element: one quantization step of its block (0 when exact)
    // Per row, for the downstream sum_rows check: sum of expect, of tol and of |expect|.
    std::vector<double> esum, tsum, msum;
    // The bytes each row held at the last check that verified it against the model. A row not
    // written since must still hold exactly these bytes (whatever the device quantizer's rounding),
    // so unwritten rows are compared with memcmp and only rows written since the last check go
    // through dequantize-and-tolerance.
    std::vector<uint8_t> ref;
    std::vector<char> dirty;  // written since the last check
    int64_t last_row = -1;
    double pre_esum = 0, pre_tsum = 0, pre_msum = 0;  // the written row's sums before this step
    size_t ring_off = 0, row_off = 0, sums_off = 0;  // places in the state buffer (bytes)
};

void model_sums(Buffer & b, int64_t row) {
    const int64_t width = b.width;
    double e = 0, t = 0, mag = 0;
    for (int64_t c = 0; c < width; c++) {
        e += b.expect[row * width + c];
        t += b.tol[row * width + c];
        mag += std::fabs(b.expect[row * width + c]);
    }
    b.esum[row] = e;
    b.tsum[row] = t;
    b.msum[row] = mag;
}

size_t pad_to(size_t n, size_t align) { return (n + align - 1) / align * align; }

uint64_t fnv(uint64_t h, const void * data, size_t n) {
    const uint8_t * b = (const uint8_t *) data;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

// Hash of what the backend computes: per node its op, type, shape, strides, flags, and where its
// data sits in its buffer (offset from the buffer's base, so two runs compare equal), plus the
// same for each source. Names are left out: ggml numbers some of them per context.
std::string graph_fingerprint(ggml_cgraph * gf) {
    uint64_t h = 0xcbf29ce484222325ULL;
    auto tensor = [&](const ggml_tensor * t) {
        int64_t v[12] = {(int64_t) t->op, (int64_t) t->type, t->ne[0], t->ne[1], t->ne[2], t->ne[3],
                         (int64_t) t->nb[1], (int64_t) t->nb[2], (int64_t) t->nb[3], (int64_t) t->flags, -1, -1};
        if (t->buffer && t->data) {
            v[10] = (int64_t) ((const char *) t->data - (const char *) ggml_backend_buffer_get_base(t->buffer));
            v[11] = (int64_t) ggml_backend_buffer_get_size(t->buffer);
        }
        h = fnv(h, v, sizeof v);
    };
    for (int i = 0; i < ggml_graph_n_nodes(gf); i++) {
        const ggml_tensor * node = ggml_graph_node(gf, i);
        tensor(node);
        for (int j = 0; j < GGML_MAX_SRC; j++) {
            if (node->src[j]) tensor(node->src[j]);
        }
    }
    char buf[20];
    snprintf(buf, sizeof buf, "%016" PRIx64, h);
    return buf;
}

int64_t row_for(const Buffer & b, int k, int64_t pos, int ratio) {
    switch (k) {
        case 0: return pos % b.nrows;                    // raw SWA KV ring: kv_start % n_swa
        case 1: case 2: return ratio + pos % ratio;      // compressor state: ratio + pos_mod
        default: return (pos / ratio) % b.nrows;         // compressed cache: token_pos / ratio
    }
}

// ggml's type traits have no to_float for f32 at older revisions.
void to_float(ggml_type t, const void * q, float * out, int64_t n) {
    if (t == GGML_TYPE_F32) {
        memcpy(out, q, sizeof(float) * n);
    } else {
        ggml_get_type_traits(t)->to_float(q, out, n);
    }
}

// Host model of one written row: round trip through ggml's CPU reference quantizer, plus the
// tolerance that a device quantizer rounding differently may use.
void model_row(const TypeInfo & ti, int64_t width, const float * ideal, float * expect, float * tol) {
    if (ti.exact) {
        memcpy(expect, ideal, sizeof(float) * width);
        for (int64_t c = 0; c < width; c++) tol[c] = 0.0f;
        return;
    }
    std::vector<uint8_t> q(ggml_row_size(ti.type, width));
    ggml_quantize_chunk(ti.type, ideal, q.data(), 0, 1, width, nullptr);
    to_float(ti.type, q.data(), expect, width);
    const int64_t bs = ggml_blck_size(ti.type);
    for (int64_t b0 = 0; b0 < width; b0 += bs) {
        float mn = ideal[b0], mx = ideal[b0];
        for (int64_t c = b0; c < b0 + bs && c < width; c++) {
            mn = std::min(mn, ideal[c]);
            mx = std::max(mx, ideal[c]);
        }
        float range = ti.asymmetric ? (mx - mn) : std::max(std::fabs(mn), std::fabs(mx));
        float t = range / ti.levels * 1.01f + 1e-6f;
        for (int64_t c = b0; c < b0 + bs && c < width; c++) tol[c] = t;
    }
}

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The graph's inputs, allocated once in a buffer of their own: the graph allocator never
// recycles them, so a constant input is set once and each step uploads only what moves.
struct Inputs {
    ggml_context * ctx = nullptr;
    ggml_backend_buffer_t buf = nullptr;
    // generic: every buffer's source row, the i64/i32 row index of each index group, the i32
    // gather position of each buffer (per-buffer views of these feed the graph), the whole-ring
    // gather indices (constant)
    ggml_tensor * x_all = nullptr, * idx_all = nullptr, * gidx_all = nullptr;
    std::vector<ggml_tensor *> allidx;
    int n_groups = 0;
    // ds4: the engine's own inputs (deepseek4_graph.cpp:1322-1340), one tensor each, and the
    // compressor's position embedding `ape` (a weight: constant)
    ggml_tensor * embed = nullptr, * raw_rows = nullptr, * ape_row = nullptr, * state_rows = nullptr,
                * comp_rows = nullptr, * ape = nullptr;
};

struct Graph {
    ggml_context * ctx = nullptr;
    ggml_cgraph * gf = nullptr;
    std::vector<ggml_tensor *> row_out, sums_out;  // per buffer, nullptr where it has none
};

// The compressor's position embedding row r, column c: a multiple of 1/128 in [-1, 1] (exact).
float ape_value(uint64_t seed, int64_t r, int64_t c) { return input_value(seed, 7, -1000 - r, c) / 8.0f; }

}  // namespace

int main(int argc, char ** argv) {
    Result r;
    parse_args(argc, argv, r);
    Params & p = r.p;
    const double t_start = now_s();

#if !SETROWS_HAVE_SET_ROWS
    unsupported(r, "this ggml revision has no ggml_set_rows (added in ggml a1938493, 2025-07-01)");
#else
    const bool ds4 = p.engine == "ds4";
    TypeInfo ti{};
    if (!type_info(p.dst_type, ti)) usage_error(r, "--dst-type '" + p.dst_type + "' is not one of f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1");
    if (!ds4 && p.width % ggml_blck_size(ti.type) != 0)
        usage_error(r, "--width " + std::to_string(p.width) + " is not a multiple of the " + p.dst_type +
                           " block size " + std::to_string(ggml_blck_size(ti.type)));
    if (p.ring_rows < p.ratio) usage_error(r, "--ring-rows must be at least " + std::to_string(p.ratio));

#if SETROWS_HAVE_BACKEND_LOAD_ALL
    ggml_backend_load_all();
#endif
    ggml_backend_dev_t dev = nullptr;
    if (p.backend.empty()) {
        dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_GPU);
        if (!dev) dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    } else {
        for (size_t i = 0; i < ggml_backend_dev_count() && !dev; i++) {
            ggml_backend_dev_t d = ggml_backend_dev_get(i);
            if (strcasecmp(ggml_backend_dev_name(d), p.backend.c_str()) == 0 ||
                strcasecmp(ggml_backend_reg_name(ggml_backend_dev_backend_reg(d)), p.backend.c_str()) == 0) {
                dev = d;
            }
        }
    }
    if (!dev) {
        std::string names;
        for (size_t i = 0; i < ggml_backend_dev_count(); i++) names += std::string(" ") + ggml_backend_dev_name(ggml_backend_dev_get(i));
        unsupported(r, "no ggml device named '" + p.backend + "' in this build; devices:" + names);
    }
    collect_backend_facts(r, dev);
    {
        std::string fl;
        for (const auto & kv : r.features) fl += " " + kv.first + "=" + kv.second;
        fprintf(stderr, "setrows-replay: backend %s features (%s):%s\n", r.backend_reg.c_str(), r.features_source.c_str(),
                fl.empty() ? " (none)" : fl.c_str());
    }
    ggml_backend_t backend = ggml_backend_dev_init(dev, nullptr);
    if (!backend) unsupported(r, std::string("could not initialise device ") + ggml_backend_dev_name(dev));
    if (p.cpu_threads > 0) {
        // the CPU backend's threads meet at a barrier after every node: on a host with fewer free
        // cores than threads each barrier waits for a descheduled thread (about 1 s a step for the
        // ds4 graph on a loaded 2-core machine, against 5 ms with one thread)
        ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
        typedef void (*set_threads_t)(ggml_backend_t, int);
        auto fn = reg ? (set_threads_t) ggml_backend_reg_get_proc_address(reg, "ggml_backend_set_n_threads") : nullptr;
        if (!fn) usage_error(r, "--cpu-threads: backend " + std::string(ggml_backend_name(backend)) + " has no thread count");
        fn(backend, p.cpu_threads);
    }
    r.backend_name = ggml_backend_name(backend);
    r.device_name = std::string(ggml_backend_dev_name(dev)) + " (" + ggml_backend_dev_description(dev) + ")";
    fprintf(stderr, "setrows-replay: device %s, ggml %s (%s), engine %s, mode %s, memory %s, %" PRId64 " steps\n",
            r.device_name.c_str(), ggml_version_str().c_str(), ggml_commit_str().c_str(), p.engine.c_str(),
            p.mode.c_str(), p.memory.c_str(), p.steps);

    // ---- memory placement ------------------------------------------------------------------------
    // device and unified: ggml's device buffer type (unified memory is ggml's own switch, an env or
    // a CMake option, that turns its device allocations managed: the replay changes nothing, it
    // only reports what the runtime says). host: the device's host buffer type, used in place by
    // the GPU, as ggml lets an integrated HIP device do.
    ggml_backend_buffer_type_t dev_buft = ggml_backend_get_default_buffer_type(backend);
    ggml_backend_buffer_type_t buft = dev_buft;
    if (p.memory == "host") {
        if (ggml_backend_buft_is_host(dev_buft))
            usage_error(r, "--memory host: " + r.backend_name + " keeps its buffers in host memory already "
                           "(host and device placement are the same buffer); use --memory device");
        buft = ggml_backend_dev_host_buffer_type(dev);
        if (!buft) unsupported(r, "--memory host: " + r.device_name + " has no host buffer type");
    }

    // ---- persistent state, allocated once in ONE buffer -----------------------------------------
    // Layout (offsets aligned for the buffer type): the rings, then per buffer the downstream
    // outputs (get_rows row, sum_rows sums). The outputs are graph nodes placed here before the
    // graph allocator runs (it leaves tensors with data alone), in every mode, so the bare loop and
    // a checked run compute the same graph in the same places and a check reads it all at once.
    std::vector<Buffer> bufs;
    if (!ds4) {
        const char * names[4] = {"raw_kv", "state_kv", "state_score", "comp_cache"};
        const int64_t nrows[4] = {p.ring_rows, 2 * p.ratio, 2 * p.ratio, p.comp_rows};
        const int groups[4] = {0, 1, 1, 2};
        for (int k = 0; k < p.buffers; k++) bufs.push_back(Buffer{names[k], nrows[k], p.width, ti, groups[k]});
    } else {
        // deepseek4_graph.cpp:3819 raw_kv F16 [head_dim, n_swa]; :3832 comp_kv F16 [head_dim, comp_cap];
        // :3841-3842 state_kv/state_score F32 [2*head_dim, 2*ratio] (ratio 4: coff 2)
        TypeInfo f16{}, f32{};
        type_info("f16", f16);
        type_info("f32", f32);
        bufs.push_back(Buffer{"raw_kv", p.ring_rows, p.width, f16, 0, Buffer::SUMS_BEFORE, false});
        bufs.push_back(Buffer{"state_kv", 2 * p.ratio, 2 * p.width, f32, 1, Buffer::SUMS_NONE, false});
        bufs.push_back(Buffer{"state_score", 2 * p.ratio, 2 * p.width, f32, 1, Buffer::SUMS_AFTER, false});
        bufs.push_back(Buffer{"comp_cache", p.comp_rows, p.width, f16, 2, Buffer::SUMS_AFTER, false});
    }
    ggml_init_params pp = {ggml_tensor_overhead() * 8, nullptr, true};
    ggml_context * pctx = ggml_init(pp);
    const size_t align = ggml_backend_buft_get_alignment(buft);
    size_t state_size = 0;
    for (Buffer & b : bufs) {
        b.rs = ggml_row_size(b.ti.type, b.width);
        b.dst = ggml_new_tensor_2d(pctx, b.ti.type, b.width, b.nrows);
        ggml_set_name(b.dst, b.name);
        b.ring_off = state_size;
        state_size += pad_to(ggml_backend_buft_get_alloc_size(buft, b.dst), align);
    }
    const size_t outputs_off = state_size;
    for (Buffer & b : bufs) {
        b.row_off = state_size;
        if (b.row_out) state_size += pad_to(sizeof(float) * b.width, align);
        b.sums_off = state_size;
        if (b.sums != Buffer::SUMS_NONE) state_size += pad_to(sizeof(float) * b.nrows, align);
    }
    // the whole buffer as one tensor: what a check copies back
    ggml_tensor * state_all = ggml_new_tensor_1d(pctx, GGML_TYPE_I8, (int64_t) state_size);
    ggml_backend_buffer_t pbuf = ggml_backend_buft_alloc_buffer(buft, state_size);
    if (!pbuf) unsupported(r, "could not allocate the persistent buffers on " + r.device_name);
    char * const state_base = (char *) ggml_backend_buffer_get_base(pbuf);
    for (Buffer & b : bufs) (void) ggml_backend_tensor_alloc(pbuf, b.dst, state_base + b.ring_off);
    (void) ggml_backend_tensor_alloc(pbuf, state_all, state_base);
    const bool checking = p.check_every > 0;
    for (size_t k = 0; k < bufs.size(); k++) {
        Buffer & b = bufs[k];
        b.expect.resize(b.nrows * b.width);
        b.tol.resize(b.nrows * b.width);
        b.esum.resize(b.nrows);
        b.tsum.resize(b.nrows);
        b.msum.resize(b.nrows);
        b.dirty.assign(b.nrows, 0);
        std::vector<float> ideal(b.width);
        std::vector<uint8_t> q(b.rs * b.nrows);
        for (int64_t row = 0; row < b.nrows; row++) {
            for (int64_t c = 0; c < b.width; c++) ideal[c] = input_value(p.seed, (int) k, -1 - row, c) * kScale + kBias;
            model_row(b.ti, b.width, ideal.data(), &b.expect[row * b.width], &b.tol[row * b.width]);
            model_sums(b, row);
            ggml_quantize_chunk(b.ti.type, ideal.data(), q.data() + row * b.rs, 0, 1, b.width, nullptr);
        }
        ggml_backend_tensor_set(b.dst, q.data(), 0, q.size());
        if (checking) b.ref = std::move(q);  // what the host itself wrote: exact
    }

    // ---- inputs ----------------------------------------------------------------------------------
    const ggml_type itype = p.index_type == "i64" ? GGML_TYPE_I64 : GGML_TYPE_I32;
    const size_t isz = ggml_type_size(itype);
    Inputs in;
    {
        ggml_init_params ip = {ggml_tensor_overhead() * 16, nullptr, true};
        in.ctx = ggml_init(ip);
        if (!ds4) {
            for (const Buffer & b : bufs) in.n_groups = std::max(in.n_groups, b.index_group + 1);
            in.x_all = ggml_new_tensor_2d(in.ctx, GGML_TYPE_F32, p.width, (int64_t) bufs.size());
            in.idx_all = ggml_new_tensor_1d(in.ctx, itype, in.n_groups);
            in.gidx_all = ggml_new_tensor_1d(in.ctx, GGML_TYPE_I32, (int64_t) bufs.size());
            for (const Buffer & b : bufs) in.allidx.push_back(ggml_new_tensor_1d(in.ctx, GGML_TYPE_I32, b.nrows));
        } else {
            in.embed = ggml_new_tensor_2d(in.ctx, GGML_TYPE_F32, 5 * p.width, 1);
            in.raw_rows = ggml_new_tensor_2d(in.ctx, GGML_TYPE_I64, 1, 1);
            in.ape_row = ggml_new_tensor_1d(in.ctx, GGML_TYPE_I32, 1);
            in.state_rows = ggml_new_tensor_2d(in.ctx, GGML_TYPE_I64, 1, 1);
            in.comp_rows = ggml_new_tensor_2d(in.ctx, GGML_TYPE_I64, 1, 1);
            in.ape = ggml_new_tensor_2d(in.ctx, GGML_TYPE_F32, 2 * p.width, p.ratio);
        }
        in.buf = ggml_backend_alloc_ctx_tensors_from_buft(in.ctx, dev_buft);
        if (!in.buf) unsupported(r, "could not allocate the graph inputs on " + r.device_name);
        for (size_t k = 0; k < in.allidx.size(); k++) {
            std::vector<int32_t> all(bufs[k].nrows);
            for (int64_t i = 0; i < bufs[k].nrows; i++) all[i] = (int32_t) i;
            ggml_backend_tensor_set(in.allidx[k], all.data(), 0, all.size() * sizeof(int32_t));
        }
        if (in.ape) {
            std::vector<float> ape(2 * p.width * p.ratio);
            for (int64_t i = 0; i < (int64_t) ape.size(); i++) ape[i] = ape_value(p.seed, i / (2 * p.width), i % (2 * p.width));
            ggml_backend_tensor_set(in.ape, ape.data(), 0, ape.size() * sizeof(float));
        }
    }
    r.uploads_per_step = ds4 ? 5 : 3;

    // ---- the placement proof: every buffer, its type, and the runtime's word on its pointer ---
    for (const Buffer & b : bufs) r.placement.push_back(placement::describe(b.name, "persistent", pbuf, b.dst->data));
    r.placement.push_back(placement::describe("outputs", "output", pbuf, state_base + outputs_off));
    r.placement.push_back(placement::describe("inputs", "input", in.buf, ggml_backend_buffer_get_base(in.buf)));
    r.placed = true;
    for (const auto & f : r.placement)
        fprintf(stderr, "setrows-replay: memory %s (%s): %s, pointer %s\n", f.name.c_str(), f.role.c_str(), f.buft.c_str(),
                f.ptr.kind.empty() ? "(no runtime to ask)" : f.ptr.kind.c_str());

    // A check's copy lands in pinned host memory when the device offers it (CUDA/HIP: a DMA
    // without staging). A buffer in host memory (the CPU backend's, or --memory host) is read
    // where it is: a copy would only add a memcpy of the whole state per check.
    ggml_backend_buffer_t hbuf = nullptr;
    std::vector<uint8_t> host_state;
    uint8_t * obs = nullptr;
    const bool state_in_host = ggml_backend_buffer_is_host(pbuf);
    if (checking && state_in_host) {
        obs = (uint8_t *) state_base;
    } else if (checking) {
        ggml_backend_buffer_type_t hbt = ggml_backend_dev_host_buffer_type(dev);
        if (hbt) hbuf = ggml_backend_buft_alloc_buffer(hbt, state_size);
        if (hbuf) {
            obs = (uint8_t *) ggml_backend_buffer_get_base(hbuf);
        } else {
            host_state.resize(state_size);
            obs = host_state.data();
        }
    }

    // ---- the single-token graph -----------------------------------------------------------------
    ggml_gallocr_t galloc = ggml_gallocr_new(dev_buft);
    auto place_output = [&](Graph & g, size_t k, ggml_tensor * sums, ggml_tensor * row) {
        if (sums) {
            ggml_set_output(sums);
            (void) ggml_backend_tensor_alloc(pbuf, sums, state_base + bufs[k].sums_off);
        }
        if (row) {
            ggml_set_output(row);
            (void) ggml_backend_tensor_alloc(pbuf, row, state_base + bufs[k].row_off);
        }
        g.sums_out[k] = sums;
        g.row_out[k] = row;
    };
    auto produce = [&](ggml_context * ctx, ggml_tensor * x) {  // the row is produced in-graph, like kv_cur
#if SETROWS_HAVE_SCALE_BIAS
        return ggml_scale_bias(ctx, x, kScale, kBias);
#else
        return ggml_scale(ctx, x, kScale);
#endif
    };
    auto build_generic = [&](Graph & g) {
        ggml_context * ctx = g.ctx;
        std::vector<ggml_tensor *> group_idx(in.n_groups, nullptr), written;
        for (size_t k = 0; k < bufs.size(); k++) {
            ggml_tensor * x = ggml_view_2d(ctx, in.x_all, p.width, 1, in.x_all->nb[1], k * in.x_all->nb[1]);
            ggml_tensor *& idx = group_idx[bufs[k].index_group];
            if (!idx) idx = ggml_view_1d(ctx, in.idx_all, 1, bufs[k].index_group * isz);
            ggml_tensor * out = ggml_set_rows(ctx, bufs[k].dst, produce(ctx, x), idx);
            ggml_build_forward_expand(g.gf, out);
            written.push_back(out);
        }
        // Downstream reads in the same graph, after every write: the whole ring and the new row.
        for (size_t k = 0; k < bufs.size(); k++) {
            ggml_tensor * from = p.read_via == "dst" ? bufs[k].dst : written[k];
            ggml_tensor * gidx = ggml_view_1d(ctx, in.gidx_all, 1, k * sizeof(int32_t));
            ggml_tensor * sums = ggml_sum_rows(ctx, ggml_get_rows(ctx, from, in.allidx[k]));
            ggml_tensor * row = ggml_get_rows(ctx, from, gidx);
            place_output(g, k, sums, row);
            ggml_build_forward_expand(g.gf, sums);
            ggml_build_forward_expand(g.gf, row);
        }
    };
    // lucebox deepseek4 decode attention at 53859c26, the set_rows nodes and what reads their
    // buffers, in the engine's expansion order (build_mla_attention, build_compressor_step):
    auto build_ds4 = [&](Graph & g) {
        ggml_context * ctx = g.ctx;
        const int64_t W = p.width;
        Buffer & raw = bufs[0];
        Buffer & skv = bufs[1];
        Buffer & ssc = bufs[2];
        Buffer & comp = bufs[3];
        ggml_tensor * kv_in = ggml_view_2d(ctx, in.embed, W, 1, in.embed->nb[1], 0);
        ggml_tensor * kvc_in = ggml_view_2d(ctx, in.embed, 2 * W, 1, in.embed->nb[1], W * sizeof(float));
        ggml_tensor * sc_in = ggml_view_2d(ctx, in.embed, 2 * W, 1, in.embed->nb[1], 3 * W * sizeof(float));
        // :999-1001 the raw ring read BEFORE this step's write (past_raw_f32, expanded first)
        ggml_tensor * past = ggml_cast(ctx, ggml_view_2d(ctx, raw.dst, W, raw.nrows, raw.dst->nb[1], 0), GGML_TYPE_F32);
        ggml_tensor * past_sums = ggml_sum_rows(ctx, past);
        place_output(g, 0, past_sums, nullptr);
        ggml_build_forward_expand(g.gf, past_sums);
        // :1009 set_rows(raw_kv F16, kv F32, raw_kv_rows I64 = kv_start % n_swa)
        ggml_build_forward_expand(g.gf, ggml_set_rows(ctx, raw.dst, produce(ctx, kv_in), in.raw_rows));
        // :648-656 kv_cur, sc_cur + ape row, then both state rows with ONE shared index
        ggml_tensor * kv_cur = produce(ctx, kvc_in);
        ggml_tensor * ape_col = ggml_reshape_2d(ctx, ggml_get_rows(ctx, in.ape, in.ape_row), 2 * W, 1);
        ggml_tensor * sc_cur = ggml_add(ctx, produce(ctx, sc_in), ape_col);
        ggml_build_forward_expand(g.gf, ggml_set_rows(ctx, skv.dst, kv_cur, in.state_rows));
        ggml_build_forward_expand(g.gf, ggml_set_rows(ctx, ssc.dst, sc_cur, in.state_rows));
        // :683-709 pooling reads the state AFTER the write: prev window (rows 0..3, first half)
        // and current window (rows 4..7, second half), concatenated; the engine's softmax
        // weighting is left out (not exact on the host), the sum over the 8 rows kept
        const size_t hi_off = p.ratio * skv.dst->nb[1] + W * skv.dst->nb[0];
        ggml_tensor * prev = ggml_view_2d(ctx, skv.dst, W, p.ratio, skv.dst->nb[1], 0);
        ggml_tensor * cur_hi = ggml_view_2d(ctx, skv.dst, W, p.ratio, skv.dst->nb[1], hi_off);
        ggml_tensor * kv_t = ggml_cont(ctx, ggml_transpose(ctx, ggml_concat(ctx, prev, cur_hi, 1)));
        ggml_tensor * pooled = ggml_reshape_2d(ctx, ggml_sum_rows(ctx, kv_t), W, 1);
        ggml_tensor * score_sums = ggml_sum_rows(ctx, ssc.dst);
        place_output(g, 2, score_sums, nullptr);
        ggml_build_forward_expand(g.gf, score_sums);
        // :744 set_rows(comp_cache F16, pooled F32, comp_rows I64 = token_pos / ratio)
        ggml_build_forward_expand(g.gf, ggml_set_rows(ctx, comp.dst, pooled, in.comp_rows));
        // :1095-1097 attention reads the compressed rows AFTER the flush
        ggml_tensor * comp_f32 =
            ggml_cast(ctx, ggml_view_2d(ctx, comp.dst, W, comp.nrows, comp.dst->nb[1], 0), GGML_TYPE_F32);
        ggml_tensor * comp_sums = ggml_sum_rows(ctx, comp_f32);
        place_output(g, 3, comp_sums, nullptr);
        ggml_build_forward_expand(g.gf, comp_sums);
    };
    auto build = [&](Graph & g) {
        ggml_init_params gp = {ggml_tensor_overhead() * 96 + ggml_graph_overhead(), nullptr, true};
        g = Graph{};
        g.ctx = ggml_init(gp);
        g.gf = ggml_new_graph(g.ctx);
        g.row_out.assign(bufs.size(), nullptr);
        g.sums_out.assign(bufs.size(), nullptr);
        if (ds4) {
            build_ds4(g);
        } else {
            build_generic(g);
        }
        for (int i = 0; i < ggml_graph_n_nodes(g.gf); i++) {
            ggml_tensor * node = ggml_graph_node(g.gf, i);
            if (!ggml_backend_supports_op(backend, node)) {
                unsupported(r, std::string(r.backend_name) + " does not support " + ggml_op_desc(node) + " for " +
                                   ggml_type_name(node->type) + " (src0 " +
                                   (node->src[0] ? ggml_type_name(node->src[0]->type) : "-") + ", src1 " +
                                   (node->src[1] ? ggml_type_name(node->src[1]->type) : "-") + ")");
            }
        }
        if (!ggml_gallocr_alloc_graph(galloc, g.gf)) unsupported(r, "could not allocate the graph on " + r.device_name);
        if (r.graph_nodes < 0) {
            r.graph_nodes = ggml_graph_n_nodes(g.gf);
            r.graph_fingerprint = graph_fingerprint(g.gf);
            fprintf(stderr, "setrows-replay: graph %d nodes, fingerprint %s, %s\n", r.graph_nodes,
                    r.graph_fingerprint.c_str(),
                    checking ? ("checked every " + std::to_string(p.check_every) + " step(s)").c_str()
                             : "bare loop: nothing checked");
        }
    };

    // ---- one step's uploads: the only moving parts ----------------------------------------------
    std::vector<std::vector<float>> ideal(bufs.size());
    for (size_t k = 0; k < bufs.size(); k++) ideal[k].resize(bufs[k].width);
    std::vector<float> xh(ds4 ? 5 * p.width : p.width * bufs.size());
    std::vector<int64_t> idx64(std::max(in.n_groups, 1));
    std::vector<int32_t> idx32(std::max(in.n_groups, 1)), gidx(bufs.size());
    auto upload = [&](int64_t pos) {
        for (size_t k = 0; k < bufs.size(); k++) bufs[k].last_row = row_for(bufs[k], (int) k, pos, p.ratio);
        if (!ds4) {
            for (size_t k = 0; k < bufs.size(); k++) {
                for (int64_t c = 0; c < p.width; c++) {
                    const float x = input_value(p.seed, (int) k, pos, c);
                    xh[k * p.width + c] = x;
                    ideal[k][c] = x * kScale + kBias;
                }
                idx64[bufs[k].index_group] = bufs[k].last_row;
                idx32[bufs[k].index_group] = (int32_t) bufs[k].last_row;
                gidx[k] = (int32_t) bufs[k].last_row;
            }
            ggml_backend_tensor_set(in.x_all, xh.data(), 0, xh.size() * sizeof(float));
            ggml_backend_tensor_set(in.idx_all, itype == GGML_TYPE_I64 ? (const void *) idx64.data() : idx32.data(), 0,
                                    in.n_groups * isz);
            ggml_backend_tensor_set(in.gidx_all, gidx.data(), 0, gidx.size() * sizeof(int32_t));
            return;
        }
        // the engine's uploads (deepseek4_graph.cpp:3293-3313): embedding, raw_kv_rows, ape_row,
        // state_rows, and comp_rows (the engine sets it at a flush boundary only; see matrix.toml);
        // rope_pos/neg_pos/comp_pos feed RoPE, not replayed
        const int64_t W = p.width;
        const int64_t pm = pos % p.ratio;
        for (int64_t c = 0; c < 5 * W; c++) {
            const int k = c < W ? 0 : c < 3 * W ? 1 : 2;
            const int64_t col = c < W ? c : c < 3 * W ? c - W : c - 3 * W;
            const float x = input_value(p.seed, k, pos, col);
            xh[c] = x;
            ideal[k][col] = x * kScale + kBias + (k == 2 ? ape_value(p.seed, pm, col) : 0.0f);
        }
        const int64_t raw_row = bufs[0].last_row, state_row = bufs[1].last_row, comp_row = bufs[3].last_row;
        const int32_t ape_row = (int32_t) pm;
        ggml_backend_tensor_set(in.embed, xh.data(), 0, xh.size() * sizeof(float));
        ggml_backend_tensor_set(in.raw_rows, &raw_row, 0, sizeof raw_row);
        ggml_backend_tensor_set(in.ape_row, &ape_row, 0, sizeof ape_row);
        ggml_backend_tensor_set(in.state_rows, &state_row, 0, sizeof state_row);
        ggml_backend_tensor_set(in.comp_rows, &comp_row, 0, sizeof comp_row);
    };
    // the host model after one step: each buffer's written row (ds4: the pooled row from the
    // state as it is after this step's state write, exactly what the graph reads)
    auto advance_model = [&]() {
        for (size_t k = 0; k < bufs.size(); k++) {
            Buffer & b = bufs[k];
            if (ds4 && k == 3) {
                const int64_t W = p.width;
                const float * e = bufs[1].expect.data();
                for (int64_t c = 0; c < W; c++) {
                    float s = 0;
                    for (int64_t row = 0; row < p.ratio; row++) s += e[row * 2 * W + c];
                    for (int64_t row = p.ratio; row < 2 * p.ratio; row++) s += e[row * 2 * W + W + c];
                    ideal[k][c] = s;
                }
            }
            const int64_t row = b.last_row;
            b.pre_esum = b.esum[row];
            b.pre_tsum = b.tsum[row];
            b.pre_msum = b.msum[row];
            model_row(b.ti, b.width, ideal[k].data(), &b.expect[row * b.width], &b.tol[row * b.width]);
            model_sums(b, row);
            b.dirty[row] = 1;
        }
    };

    Graph g;
    double tb = now_s();
    if (p.mode == "reuse") build(g);
    r.build_s += now_s() - tb;

    std::vector<uint8_t> rowbytes, saved;
    std::vector<float> got;
    double t_loop = 0;
    auto fail = [&](int64_t step, const std::string & what) {
        printf("SETROWS_MISMATCH step=%" PRId64 " %s\n", step, what.c_str());
        fprintf(stderr, "setrows-replay: first difference at step %" PRId64 ": %s\n", step, what.c_str());
        r.status = "mismatch";
        r.message = "step " + std::to_string(step) + ": " + what;
        r.first_failing_step = step;
        r.total_s = now_s() - t_start;
        r.loop_s = now_s() - t_loop;
        finish(r, EXIT_MISMATCH);
    };
    auto diff = [&](int64_t step, const Buffer & b, const char * where, int64_t row, int64_t col, float e, float gv) {
        char buf[256];
        snprintf(buf, sizeof buf, "buffer=%s %s row=%" PRId64 " col=%" PRId64 " expected=%.6g got=%.6g", b.name, where, row,
                 col, e, gv);
        fail(step, buf);
    };

    t_loop = now_s();
    for (int64_t step = 0; step < p.steps; step++) {
        const int64_t pos = p.start_row + step;
        if (p.mode == "rebuild") {
            tb = now_s();
            build(g);
            r.build_s += now_s() - tb;
        }
        const double tc = now_s();
        upload(pos);
        const bool inject_now = p.inject != "none" && step == p.inject_step;
        if (inject_now && p.inject != "corrupt") {  // keep what the written row held before this step
            saved.resize(bufs[0].rs);
            ggml_backend_tensor_get(bufs[0].dst, saved.data(), bufs[0].last_row * bufs[0].dst->nb[1], bufs[0].rs);
        }
        if (ggml_backend_graph_compute(backend, g.gf) != GGML_STATUS_SUCCESS) {
            fail(step, "ggml_backend_graph_compute returned an error status");
        }
        r.compute_s += now_s() - tc;
        if (checking) advance_model();
        r.steps_run = step + 1;

        // ---- fault injection: the test harness tampers with device memory between compute and
        // check, through the public API; the checker below is the same code in every mode.
        if (inject_now) {
            Buffer & b = bufs[0];
            if (p.inject == "corrupt") {  // a stray write into a row this step did not write
                const int64_t row = (b.last_row + 1) % b.nrows;
                std::vector<float> vals(b.width);
                rowbytes.resize(b.rs);
                ggml_backend_tensor_get(b.dst, rowbytes.data(), row * b.dst->nb[1], b.rs);
                to_float(b.ti.type, rowbytes.data(), vals.data(), b.width);
                vals[b.width / 2] += 100.0f;
                ggml_quantize_chunk(b.ti.type, vals.data(), rowbytes.data(), 0, 1, b.width, nullptr);
                ggml_backend_tensor_set(b.dst, rowbytes.data(), row * b.dst->nb[1], b.rs);
            } else if (p.inject == "skip-write") {  // the write never happened
                ggml_backend_tensor_set(b.dst, saved.data(), b.last_row * b.dst->nb[1], b.rs);
            } else if (!ds4) {  // the downstream read saw the row as it was before the write
                std::vector<float> old(b.width);
                to_float(b.ti.type, saved.data(), old.data(), b.width);
                ggml_backend_tensor_set(g.row_out[0], old.data(), 0, b.width * sizeof(float));
            } else {  // ds4: attention's read of the compressed rows saw the flushed row's old sum
                const Buffer & c = bufs[3];
                const float old = (float) c.pre_esum;
                ggml_backend_tensor_set(g.sums_out[3], &old, c.last_row * sizeof(float), sizeof old);
            }
        }

        if (checking && ((step + 1) % p.check_every == 0 || step + 1 == p.steps || inject_now)) {
            const double tk = now_s();
            r.checks_run++;
            // one copy of the whole state: every ring and every downstream output of this step
            if (!state_in_host) ggml_backend_tensor_get(state_all, obs, 0, state_size);
            for (size_t k = 0; k < bufs.size(); k++) {  // every row of every buffer
                Buffer & b = bufs[k];
                got.resize(b.width);
                for (int64_t row = 0; row < b.nrows; row++) {
                    const uint8_t * o = obs + b.ring_off + row * b.rs;
                    uint8_t * ref = b.ref.data() + row * b.rs;
                    const char * where = row == b.last_row ? "written-row" : "unwritten-row";
                    if (b.dirty[row]) {  // written since the last check: the model, within tolerance
                        to_float(b.ti.type, o, got.data(), b.width);
                        for (int64_t c = 0; c < b.width; c++) {
                            const float e = b.expect[row * b.width + c];
                            if (!(std::fabs(got[c] - e) <= b.tol[row * b.width + c])) diff(step, b, where, row, c, e, got[c]);
                        }
                        memcpy(ref, o, b.rs);
                        b.dirty[row] = 0;
                    } else if (memcmp(o, ref, b.rs) != 0) {  // not written since it was verified: same bytes
                        std::vector<float> was(b.width);
                        to_float(b.ti.type, ref, was.data(), b.width);
                        to_float(b.ti.type, o, got.data(), b.width);
                        for (int64_t c = 0; c < b.width; c++) {
                            if (memcmp(&was[c], &got[c], sizeof(float)) != 0) diff(step, b, where, row, c, was[c], got[c]);
                        }
                        fail(step, std::string("buffer=") + b.name + " " + where + " row=" + std::to_string(row) +
                                       " col=-1 bytes changed but dequantize to the same values");
                    }
                }
            }
            for (size_t k = 0; k < bufs.size(); k++) {  // downstream reads in the same graph
                const Buffer & b = bufs[k];
                if (b.row_out) {
                    const float * row_out = (const float *) (obs + b.row_off);
                    for (int64_t c = 0; c < b.width; c++) {
                        const float e = b.expect[b.last_row * b.width + c];
                        if (!(std::fabs(row_out[c] - e) <= b.tol[b.last_row * b.width + c])) {
                            diff(step, b, "downstream-get_rows", b.last_row, c, e, row_out[c]);
                        }
                    }
                }
                if (b.sums == Buffer::SUMS_NONE) continue;
                const float * sums = (const float *) (obs + b.sums_off);
                for (int64_t row = 0; row < b.nrows; row++) {
                    // a read ordered before the write sees the written row as it was
                    const bool pre = b.sums == Buffer::SUMS_BEFORE && row == b.last_row;
                    const double e = pre ? b.pre_esum : b.esum[row];
                    const double t = pre ? b.pre_tsum : b.tsum[row];
                    const double m = pre ? b.pre_msum : b.msum[row];
                    if (!(std::fabs(sums[row] - e) <= t + 1e-6 * m + 1e-6)) {
                        diff(step, b, pre ? "downstream-sum_rows-before-write" : "downstream-sum_rows", row, -1, (float) e,
                             sums[row]);
                    }
                }
            }
            r.check_s += now_s() - tk;
        }
        if (p.mode == "rebuild") {
            ggml_free(g.ctx);
            g.ctx = nullptr;
        }
    }

    r.total_s = now_s() - t_start;
    r.loop_s = now_s() - t_loop;
    if (checking) {
        r.status = "pass";
        r.message = "all " + std::to_string(r.steps_run) + " steps matched the host model (" +
                    std::to_string(r.checks_run) + " checks)";
    } else {
        r.status = "unchecked";
        r.message = "bare loop (--check-every 0): " + std::to_string(r.steps_run) +
                    " steps computed, nothing checked; a timing baseline, not a verdict";
    }
    fprintf(stderr, "setrows-replay: %s, %" PRId64 " steps, %" PRId64 " checks, %.1f steps/s (loop only: %.1f)\n",
            r.status.c_str(), r.steps_run, r.checks_run, r.total_s > 0 ? r.steps_run / r.total_s : 0.0,
            r.loop_s > 0 ? r.steps_run / r.loop_s : 0.0);
    if (g.ctx) ggml_free(g.ctx);
    ggml_gallocr_free(galloc);
    if (hbuf) ggml_backend_buffer_free(hbuf);
    ggml_backend_buffer_free(in.buf);
    ggml_free(in.ctx);
    ggml_backend_buffer_free(pbuf);
    ggml_free(pctx);
    ggml_backend_free(backend);
    finish(r, EXIT_PASS);
#endif
}
