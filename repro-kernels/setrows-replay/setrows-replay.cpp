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
// Exit codes: 0 pass (or, with --check-every 0, "unchecked": nothing was checked), 1 mismatch
// (first difference printed), 2 usage error, 3 the backend or this ggml revision cannot run the
// requested op/type (reported, not crashed). Aborts and GPU faults are NOT caught: they stay
// signals so the orchestrator classifies them.
// The last line on stdout is always `SETROWS_RESULT {json}` when the process exits normally.

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"

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
    printf("SETROWS_RESULT {\"tool\":\"setrows-replay\",\"format\":2,\"status\":\"%s\",\"exit_code\":%d,"
           "\"message\":\"%s\",\"backend\":\"%s\",\"device\":\"%s\",\"ggml_version\":\"%s\",\"ggml_commit\":\"%s\","
           "\"params\":{\"mode\":\"%s\",\"steps\":%" PRId64 ",\"ring_rows\":%" PRId64 ",\"width\":%" PRId64
           ",\"dst_type\":\"%s\",\"index_type\":\"%s\",\"start_row\":%" PRId64 ",\"buffers\":%d,\"seed\":%" PRIu64
           ",\"check_every\":%" PRId64 ",\"read_via\":\"%s\",\"inject\":\"%s\",\"inject_step\":%" PRId64 "},"
           "\"steps_run\":%" PRId64 ",\"checks_run\":%" PRId64 ",\"first_failing_step\":%s,"
           "\"graph\":{\"nodes\":%d,\"fingerprint\":%s},"
           "\"timings\":{\"total_s\":%.6f,\"build_s\":%.6f,\"compute_s\":%.6f,\"check_s\":%.6f,\"steps_per_s\":%.2f,"
           "\"loop_s\":%.6f,\"loop_steps_per_s\":%.2f}%s}\n",
           r.status.c_str(), code, json_escape(r.message).c_str(), json_escape(r.backend_name).c_str(),
           json_escape(r.device_name).c_str(), json_escape(ggml_version_str()).c_str(),
           json_escape(ggml_commit_str()).c_str(), json_escape(p.mode).c_str(), p.steps, p.ring_rows, p.width, json_escape(p.dst_type).c_str(),
           json_escape(p.index_type).c_str(), p.start_row, p.buffers, p.seed, p.check_every,
           json_escape(p.read_via).c_str(), json_escape(p.inject).c_str(),
           p.inject_step, r.steps_run, r.checks_run,
           r.first_failing_step < 0 ? "null" : std::to_string(r.first_failing_step).c_str(), r.graph_nodes,
           json_str_or_null(!r.graph_fingerprint.empty(), r.graph_fingerprint).c_str(), r.total_s, r.build_s,
           r.compute_s, r.check_s, sps, r.loop_s, r.loop_s > 0 ? double(r.steps_run) / r.loop_s : 0.0, facts.c_str());
    fflush(stdout);
    exit(code);
}

[[noreturn]] void usage_error(Result & r, const std::string & msg) {
    fprintf(stderr, "setrows-replay: usage error: %s\n", msg.c_str());
    fprintf(stderr,
            "usage: setrows-replay [--mode reuse|rebuild] [--backend NAME] [--steps N | --wraps K] [--ring-rows R]\n"
            "       [--width W] [--dst-type f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1] [--index-type i64|i32]\n"
            "       [--start-row S] [--buffers 1..4] [--seed N] [--check-every K (0: bare loop)] [--read-via dst|result]\n"
            "       [--inject none|corrupt|skip-write|stale-read] [--inject-step N]\n");
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
        } else if (a == "--width") {
            p.width = num(1, INT64_C(1) << 24);
        } else if (a == "--dst-type") {
            p.dst_type = v;
        } else if (a == "--index-type") {
            p.index_type = v;
            if (p.index_type != "i64" && p.index_type != "i32") usage_error(r, "--index-type must be i64 or i32");
        } else if (a == "--start-row") {
            p.start_row = num(0, INT64_C(1) << 62);
        } else if (a == "--buffers") {
            p.buffers = (int) num(1, 4);
        } else if (a == "--seed") {
            p.seed = (uint64_t) num(0, INT64_MAX);
        } else if (a == "--check-every") {
            p.check_every = num(0, INT64_C(1) << 40);
        } else if (a == "--read-via") {
            p.read_via = v;
            if (p.read_via != "dst" && p.read_via != "result") usage_error(r, "--read-via must be dst or result");
        } else if (a == "--inject") {
            p.inject = v;
            if (p.inject != "none" && p.inject != "corrupt" && p.inject != "skip-write" && p.inject != "stale-read")
                usage_error(r, "--inject must be none, corrupt, skip-write or stale-read");
        } else if (a == "--inject-step") {
            p.inject_step = num(0, INT64_C(1) << 40);
        } else {
            usage_error(r, "unknown flag " + a);
        }
    }
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
    int index_group;  // buffers in one group share their index tensor (state_kv / state_score)
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
    size_t ring_off = 0, row_off = 0, sums_off = 0;  // places in the state buffer (bytes)
};

void model_sums(Buffer & b, int64_t row, int64_t width) {
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

struct Graph {
    ggml_context * ctx = nullptr;
    ggml_cgraph * gf = nullptr;
    std::vector<ggml_tensor *> x, idx, gidx, allidx, row_out, sums_out;
};

}  // namespace

int main(int argc, char ** argv) {
    Result r;
    parse_args(argc, argv, r);
    Params & p = r.p;
    const double t_start = now_s();

#if !SETROWS_HAVE_SET_ROWS
    unsupported(r, "this ggml revision has no ggml_set_rows (added in ggml a1938493, 2025-07-01)");
#else
    TypeInfo ti{};
    if (!type_info(p.dst_type, ti)) usage_error(r, "--dst-type '" + p.dst_type + "' is not one of f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1");
    if (p.width % ggml_blck_size(ti.type) != 0)
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
    r.backend_name = ggml_backend_name(backend);
    r.device_name = std::string(ggml_backend_dev_name(dev)) + " (" + ggml_backend_dev_description(dev) + ")";
    fprintf(stderr, "setrows-replay: device %s, ggml %s (%s), mode %s, %" PRId64 " steps, dst %s, idx %s\n",
            r.device_name.c_str(), ggml_version_str().c_str(), ggml_commit_str().c_str(), p.mode.c_str(), p.steps,
            p.dst_type.c_str(), p.index_type.c_str());

    // ---- persistent state, allocated once in ONE backend buffer ---------------------------------
    // Layout (offsets aligned for the buffer type): the rings, then per buffer the downstream
    // outputs (get_rows row, sum_rows sums). The outputs are graph nodes placed here before the
    // graph allocator runs (it leaves tensors with data alone), in every mode, so the bare loop and
    // a checked run compute the same graph in the same places and a check reads it all at once.
    std::vector<Buffer> bufs;
    const char * names[4] = {"raw_kv", "state_kv", "state_score", "comp_cache"};
    const int64_t nrows[4] = {p.ring_rows, 2 * p.ratio, 2 * p.ratio, std::max<int64_t>(1, p.ring_rows / p.ratio)};
    const int groups[4] = {0, 1, 1, 2};
    for (int k = 0; k < p.buffers; k++) bufs.push_back(Buffer{names[k], nrows[k], groups[k]});
    ggml_init_params pp = {ggml_tensor_overhead() * 8, nullptr, true};
    ggml_context * pctx = ggml_init(pp);
    ggml_backend_buffer_type_t buft = ggml_backend_get_default_buffer_type(backend);
    const size_t align = ggml_backend_buft_get_alignment(buft);
    size_t state_size = 0;
    for (Buffer & b : bufs) {
        b.dst = ggml_new_tensor_2d(pctx, ti.type, p.width, b.nrows);
        ggml_set_name(b.dst, b.name);
        b.ring_off = state_size;
        state_size += pad_to(ggml_backend_buft_get_alloc_size(buft, b.dst), align);
    }
    for (Buffer & b : bufs) {
        b.row_off = state_size;
        state_size += pad_to(sizeof(float) * p.width, align);
        b.sums_off = state_size;
        state_size += pad_to(sizeof(float) * b.nrows, align);
    }
    // the whole buffer as one tensor: what a check copies back
    ggml_tensor * state_all = ggml_new_tensor_1d(pctx, GGML_TYPE_I8, (int64_t) state_size);
    ggml_backend_buffer_t pbuf = ggml_backend_buft_alloc_buffer(buft, state_size);
    if (!pbuf) unsupported(r, "could not allocate the persistent buffers on " + r.device_name);
    char * const state_base = (char *) ggml_backend_buffer_get_base(pbuf);
    for (Buffer & b : bufs) (void) ggml_backend_tensor_alloc(pbuf, b.dst, state_base + b.ring_off);
    (void) ggml_backend_tensor_alloc(pbuf, state_all, state_base);
    const size_t rs = ggml_row_size(ti.type, p.width);
    const bool checking = p.check_every > 0;
    for (size_t k = 0; k < bufs.size(); k++) {
        Buffer & b = bufs[k];
        b.expect.resize(b.nrows * p.width);
        b.tol.resize(b.nrows * p.width);
        b.esum.resize(b.nrows);
        b.tsum.resize(b.nrows);
        b.msum.resize(b.nrows);
        b.dirty.assign(b.nrows, 0);
        std::vector<float> ideal(p.width);
        std::vector<uint8_t> q(rs * b.nrows);
        for (int64_t row = 0; row < b.nrows; row++) {
            for (int64_t c = 0; c < p.width; c++) ideal[c] = input_value(p.seed, (int) k, -1 - row, c) * kScale + kBias;
            model_row(ti, p.width, ideal.data(), &b.expect[row * p.width], &b.tol[row * p.width]);
            model_sums(b, row, p.width);
            ggml_quantize_chunk(ti.type, ideal.data(), q.data() + row * rs, 0, 1, p.width, nullptr);
        }
        ggml_backend_tensor_set(b.dst, q.data(), 0, q.size());
        if (checking) b.ref = std::move(q);  // what the host itself wrote: exact
    }
    // A check's copy lands in pinned host memory when the device offers it (CUDA/HIP: a DMA
    // without staging). A buffer in host memory (the CPU backend) is read where it is: a copy
    // would only add a memcpy of the whole state per check.
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
    const ggml_type itype = p.index_type == "i64" ? GGML_TYPE_I64 : GGML_TYPE_I32;
    ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_get_default_buffer_type(backend));
    auto build = [&](Graph & g) {
        ggml_init_params gp = {ggml_tensor_overhead() * 64 + ggml_graph_overhead(), nullptr, true};
        g = Graph{};
        g.ctx = ggml_init(gp);
        g.gf = ggml_new_graph(g.ctx);
        ggml_tensor * group_idx[3] = {nullptr, nullptr, nullptr};
        std::vector<ggml_tensor *> written;
        for (size_t k = 0; k < bufs.size(); k++) {
            ggml_tensor * x = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, p.width, 1);
            ggml_set_input(x);
#if SETROWS_HAVE_SCALE_BIAS
            ggml_tensor * src = ggml_scale_bias(g.ctx, x, kScale, kBias);  // the row is produced in-graph, like kv_cur
#else
            ggml_tensor * src = ggml_scale(g.ctx, x, kScale);
#endif
            ggml_tensor *& idx = group_idx[bufs[k].index_group];
            if (!idx) {
                idx = ggml_new_tensor_1d(g.ctx, itype, 1);
                ggml_set_input(idx);
            }
            ggml_tensor * out = ggml_set_rows(g.ctx, bufs[k].dst, src, idx);
            ggml_build_forward_expand(g.gf, out);
            g.x.push_back(x);
            g.idx.push_back(idx);
            written.push_back(out);
        }
        // Downstream reads in the same graph, after every write: the whole ring and the new row.
        for (size_t k = 0; k < bufs.size(); k++) {
            ggml_tensor * from = p.read_via == "dst" ? bufs[k].dst : written[k];
            ggml_tensor * all = ggml_new_tensor_1d(g.ctx, GGML_TYPE_I32, bufs[k].nrows);
            ggml_set_input(all);
            ggml_tensor * gidx = ggml_new_tensor_1d(g.ctx, GGML_TYPE_I32, 1);
            ggml_set_input(gidx);
            ggml_tensor * sums = ggml_sum_rows(g.ctx, ggml_get_rows(g.ctx, from, all));
            ggml_tensor * row = ggml_get_rows(g.ctx, from, gidx);
            ggml_set_output(sums);
            ggml_set_output(row);
            (void) ggml_backend_tensor_alloc(pbuf, sums, state_base + bufs[k].sums_off);
            (void) ggml_backend_tensor_alloc(pbuf, row, state_base + bufs[k].row_off);
            ggml_build_forward_expand(g.gf, sums);
            ggml_build_forward_expand(g.gf, row);
            g.allidx.push_back(all);
            g.gidx.push_back(gidx);
            g.sums_out.push_back(sums);
            g.row_out.push_back(row);
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
    // Input memory is recycled by the allocator once its consumers ran, so every input is set
    // before every compute, as llama.cpp does, even the constant ones.
    std::vector<std::vector<int32_t>> all_rows(bufs.size());
    for (size_t k = 0; k < bufs.size(); k++) {
        all_rows[k].resize(bufs[k].nrows);
        for (int64_t i = 0; i < bufs[k].nrows; i++) all_rows[k][i] = (int32_t) i;
    }

    Graph g;
    double tb = now_s();
    if (p.mode == "reuse") build(g);
    r.build_s += now_s() - tb;

    std::vector<std::vector<float>> ideal(bufs.size(), std::vector<float>(p.width));
    std::vector<std::vector<float>> inputs(bufs.size(), std::vector<float>(p.width));
    std::vector<uint8_t> rowbytes(rs), saved;
    std::vector<float> got(p.width);
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
        // inputs: the source rows and this step's destination rows (the only moving parts)
        for (size_t k = 0; k < bufs.size(); k++) {
            for (int64_t c = 0; c < p.width; c++) {
                inputs[k][c] = input_value(p.seed, (int) k, pos, c);
                ideal[k][c] = inputs[k][c] * kScale + kBias;
            }
            ggml_backend_tensor_set(g.x[k], inputs[k].data(), 0, p.width * sizeof(float));
            const int64_t row = row_for(bufs[k], (int) k, pos, p.ratio);
            bufs[k].last_row = row;
            if (itype == GGML_TYPE_I64) {
                int64_t v = row;
                ggml_backend_tensor_set(g.idx[k], &v, 0, sizeof v);
            } else {
                int32_t v = (int32_t) row;
                ggml_backend_tensor_set(g.idx[k], &v, 0, sizeof v);
            }
            int32_t gv = (int32_t) row;
            ggml_backend_tensor_set(g.gidx[k], &gv, 0, sizeof gv);
            ggml_backend_tensor_set(g.allidx[k], all_rows[k].data(), 0, all_rows[k].size() * sizeof(int32_t));
        }
        const bool inject_now = p.inject != "none" && step == p.inject_step;
        if (inject_now && p.inject != "corrupt") {  // keep what the written row held before this step
            saved.resize(rs);
            ggml_backend_tensor_get(bufs[0].dst, saved.data(), bufs[0].last_row * bufs[0].dst->nb[1], rs);
        }
        if (ggml_backend_graph_compute(backend, g.gf) != GGML_STATUS_SUCCESS) {
            fail(step, "ggml_backend_graph_compute returned an error status");
        }
        r.compute_s += now_s() - tc;
        for (size_t k = 0; checking && k < bufs.size(); k++) {
            Buffer & b = bufs[k];
            model_row(ti, p.width, ideal[k].data(), &b.expect[b.last_row * p.width], &b.tol[b.last_row * p.width]);
            model_sums(b, b.last_row, p.width);
            b.dirty[b.last_row] = 1;
        }
        r.steps_run = step + 1;

        // ---- fault injection: the test harness tampers with device memory between compute and
        // check, through the public API; the checker below is the same code in every mode.
        if (inject_now) {
            Buffer & b = bufs[0];
            if (p.inject == "corrupt") {  // a stray write into a row this step did not write
                const int64_t row = (b.last_row + 1) % b.nrows;
                std::vector<float> vals(p.width);
                ggml_backend_tensor_get(b.dst, rowbytes.data(), row * b.dst->nb[1], rs);
                to_float(ti.type, rowbytes.data(), vals.data(), p.width);
                vals[p.width / 2] += 100.0f;
                ggml_quantize_chunk(ti.type, vals.data(), rowbytes.data(), 0, 1, p.width, nullptr);
                ggml_backend_tensor_set(b.dst, rowbytes.data(), row * b.dst->nb[1], rs);
            } else if (p.inject == "skip-write") {  // the write never happened
                ggml_backend_tensor_set(b.dst, saved.data(), b.last_row * b.dst->nb[1], rs);
            } else {  // the downstream read saw the row as it was before the write
                std::vector<float> old(p.width);
                to_float(ti.type, saved.data(), old.data(), p.width);
                ggml_backend_tensor_set(g.row_out[0], old.data(), 0, p.width * sizeof(float));
            }
        }

        if (checking && ((step + 1) % p.check_every == 0 || step + 1 == p.steps || inject_now)) {
            const double tk = now_s();
            r.checks_run++;
            // one copy of the whole state: every ring and every downstream output of this step
            if (!state_in_host) ggml_backend_tensor_get(state_all, obs, 0, state_size);
            for (size_t k = 0; k < bufs.size(); k++) {  // every row of every buffer
                Buffer & b = bufs[k];
                for (int64_t row = 0; row < b.nrows; row++) {
                    const uint8_t * o = obs + b.ring_off + row * rs;
                    uint8_t * ref = b.ref.data() + row * rs;
                    const char * where = row == b.last_row ? "written-row" : "unwritten-row";
                    if (b.dirty[row]) {  // written since the last check: the model, within tolerance
                        to_float(ti.type, o, got.data(), p.width);
                        for (int64_t c = 0; c < p.width; c++) {
                            const float e = b.expect[row * p.width + c];
                            if (!(std::fabs(got[c] - e) <= b.tol[row * p.width + c])) diff(step, b, where, row, c, e, got[c]);
                        }
                        memcpy(ref, o, rs);
                        b.dirty[row] = 0;
                    } else if (memcmp(o, ref, rs) != 0) {  // not written since it was verified: same bytes
                        std::vector<float> was(p.width);
                        to_float(ti.type, ref, was.data(), p.width);
                        to_float(ti.type, o, got.data(), p.width);
                        for (int64_t c = 0; c < p.width; c++) {
                            if (memcmp(&was[c], &got[c], sizeof(float)) != 0) diff(step, b, where, row, c, was[c], got[c]);
                        }
                        fail(step, std::string("buffer=") + b.name + " " + where + " row=" + std::to_string(row) +
                                       " col=-1 bytes changed but dequantize to the same values");
                    }
                }
            }
            for (size_t k = 0; k < bufs.size(); k++) {  // downstream reads in the same graph
                const Buffer & b = bufs[k];
                const float * row_out = (const float *) (obs + b.row_off);
                for (int64_t c = 0; c < p.width; c++) {
                    const float e = b.expect[b.last_row * p.width + c];
                    if (!(std::fabs(row_out[c] - e) <= b.tol[b.last_row * p.width + c])) {
                        diff(step, b, "downstream-get_rows", b.last_row, c, e, row_out[c]);
                    }
                }
                const float * sums = (const float *) (obs + b.sums_off);
                for (int64_t row = 0; row < b.nrows; row++) {
                    if (!(std::fabs(sums[row] - b.esum[row]) <= b.tsum[row] + 1e-6 * b.msum[row] + 1e-6)) {
                        diff(step, b, "downstream-sum_rows", row, -1, (float) b.esum[row], sums[row]);
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
    ggml_backend_buffer_free(pbuf);
    ggml_free(pctx);
    ggml_backend_free(backend);
    finish(r, EXIT_PASS);
#endif
}
