// setrows-kernel: a standalone replica of ggml's k_set_rows (src/ggml-cuda/set-rows.cu, which HIP
// compiles too) so that launch-geometry and index-math questions of Luce-Org/lucebox#516 can be
// answered without ggml: int64 global index from blockDim.x*blockIdx.x+threadIdx.x, 32-bit fast
// division of that index, int64 destination offset dst_row*s1. The destination is a strided
// view (row pitch = width + guard) so canary bands sit before, after and between rows and reveal
// out-of-bounds writes without a sanitizer; sizes can cross 2^31 elements and bytes.
//
// Exit codes as setrows-replay: 0 pass, 1 mismatch/canary hit, 2 usage, 3 no device or not
// enough memory. A GPU fault stays a fault: the runtime error is printed ("cudaError ..." /
// "hipError ...") and the process aborts.

#include "gpu-portability.h"

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

// ---- the ggml pieces, copied in spirit from ggml-cuda/common.cuh ----------------------------------
static uint3 init_fastdiv_values(uint64_t d_64) {
    uint32_t d = (uint32_t) d_64;
    uint32_t L = 0;
    while (L < 32 && (uint32_t{1} << L) < d) {
        L++;
    }
    uint32_t mp = (uint32_t) ((uint64_t{1} << 32) * ((uint64_t{1} << L) - d) / d + 1);
    return make_uint3(mp, L, d);
}

static __device__ __forceinline__ uint32_t fastdiv(uint32_t n, const uint3 v) {
    const uint32_t hi = __umulhi(n, v.x);
    return (hi + n) >> v.y;
}

static __device__ __forceinline__ uint32_t fastmodulo(uint32_t n, const uint3 v) {
    return n - fastdiv(n, v) * v.z;
}

static __device__ __forceinline__ uint2 fast_div_modulo(uint32_t n, const uint3 v) {
    const uint32_t d = fastdiv(n, v);
    return make_uint2(d, n - d * v.z);
}

template <typename T> __device__ __forceinline__ T cast_to(float x);
template <> __device__ __forceinline__ float cast_to<float>(float x) { return x; }
template <> __device__ __forceinline__ half cast_to<half>(float x) { return __float2half(x); }

// k_set_rows as in ggml (2D case of its 4D index math). OFFSET32 replicates a hypothetical bug
// (32-bit destination offset) so the checks can be shown to catch one.
template <typename idx_t, typename dst_t, bool OFFSET32>
static __global__ void k_set_rows(const float * __restrict__ src0, const idx_t * __restrict__ src1,
                                  dst_t * __restrict__ dst, const int64_t ne_total, const int64_t s01,
                                  const int64_t s02, const int64_t s03, const int64_t s10, const int64_t s11,
                                  const int64_t s12, const int64_t s1, const int64_t s2, const int64_t s3,
                                  const uint3 ne00, const uint3 ne01, const uint3 ne02, const uint3 ne11_fd,
                                  const uint3 ne12_fd) {
    const int64_t i = int64_t(blockDim.x) * blockIdx.x + threadIdx.x;
    if (i >= ne_total) {
        return;
    }
    uint32_t tmp = (uint32_t) i;
    uint2 dm;
    dm = fast_div_modulo(tmp, ne00);
    const int64_t i00 = dm.y;
    tmp = dm.x;
    dm = fast_div_modulo(tmp, ne01);
    const int64_t i01 = dm.y;
    tmp = dm.x;
    dm = fast_div_modulo(tmp, ne02);
    const int64_t i02 = dm.y;
    const int64_t i03 = dm.x;
    const int64_t i12 = fastmodulo((uint32_t) i03, ne12_fd);
    const int64_t i11 = fastmodulo((uint32_t) i02, ne11_fd);
    const int64_t i10 = i01;

    const int64_t dst_row = *(src1 + i10 * s10 + i11 * s11 + i12 * s12);
    const float * src0_row = src0 + i01 * s01 + i02 * s02 + i03 * s03;
    dst_t * dst_row_ptr;
    if (OFFSET32) {
        dst_row_ptr = dst + (int32_t) (dst_row * s1 + i02 * s2 + i03 * s3);
    } else {
        dst_row_ptr = dst + dst_row * s1 + i02 * s2 + i03 * s3;
    }
    dst_row_ptr[i00] = cast_to<dst_t>(src0_row[i00]);
}

// What the device code that actually ran was compiled for: its wave size and target, written by
// the device itself (the macros exist only in the device compilation pass, so the host cannot
// know them otherwise). AMD: __builtin_amdgcn_wavefrontsize() and __amdgcn_target_id__ (e.g.
// "gfx1151"); NVIDIA: warpSize and __CUDA_ARCH__.
struct DeviceFacts {
    int wave_size;
    int cuda_arch;
    char arch[64];
};

static __global__ void k_build_facts(DeviceFacts * out) {
    if (threadIdx.x != 0 || blockIdx.x != 0) {
        return;
    }
    const char * a = "";
    out->cuda_arch = 0;
#if defined(__HIP_DEVICE_COMPILE__) && defined(__AMDGCN__)
    out->wave_size = __builtin_amdgcn_wavefrontsize();
#if defined(__amdgcn_target_id__)
    a = __amdgcn_target_id__;
#elif defined(__amdgcn_processor__)
    a = __amdgcn_processor__;
#endif
#elif defined(__CUDA_ARCH__)
    out->wave_size = warpSize;
    out->cuda_arch = __CUDA_ARCH__;
#else
    out->wave_size = 0;
#endif
    int i = 0;
    for (; a[i] != '\0' && i < (int) sizeof(out->arch) - 1; i++) {
        out->arch[i] = a[i];
    }
    out->arch[i] = '\0';
}

// ---- host side ------------------------------------------------------------------------------------
struct Params {
    int block_size = 256;  // ggml's CUDA_SET_ROWS_BLOCK_SIZE
    std::string grid = "exact";
    int64_t width = 128, guard = 16, rows = 1024, rows_per_launch = 1, stride = 1, start_row = 0, launches = 64;
    std::string dst_type = "f32", index_type = "i64", offset_math = "i64";
    uint64_t seed = 1;
};

static std::string g_status = "usage", g_message;

// Flag values end up in the JSON line: escape them.
static std::string json_escape(const std::string & in) {
    std::string o;
    for (char c : in) {
        if (c == '"' || c == '\\') {
            o += '\\';
            o += c;
        } else if ((unsigned char) c < 0x20) {
            char b[8];
            snprintf(b, sizeof b, "\\u%04x", c);
            o += b;
        } else {
            o += c;
        }
    }
    return o;
}
static Params g_p;
// format 2: what ran. Empty/0 = unknown (usage error before the device was queried): printed as null.
static std::string g_dev_name, g_dev_arch, g_arch;
static int g_dev_warp = 0, g_wave = 0;
static int64_t g_launches_run = 0, g_first_fail = -1;
static double g_total_bytes = 0;

static std::string str_or_null(const std::string & v) {
    return v.empty() ? std::string("null") : "\"" + json_escape(v) + "\"";
}
static std::string int_or_null(int v) {
    return v > 0 ? std::to_string(v) : std::string("null");
}

[[noreturn]] static void finish(int code) {
    const Params & p = g_p;
    // wave_size / arch: reported by the device code that ran (k_build_facts); device_*: runtime
    // device properties; dflash_wave_size: the compile-time DFLASH_WAVE_SIZE (also params.wave_size).
    const std::string facts = ",\"wave_size\":" + int_or_null(g_wave) + ",\"arch\":" + str_or_null(g_arch) +
                              ",\"dflash_wave_size\":" + std::to_string(DFLASH_WAVE_SIZE) +
                              ",\"device_name\":" + str_or_null(g_dev_name) + ",\"device_arch\":" + str_or_null(g_dev_arch) +
                              ",\"device_warp_size\":" + int_or_null(g_dev_warp);
    printf("SETROWS_RESULT {\"tool\":\"setrows-kernel\",\"format\":2,\"status\":\"%s\",\"exit_code\":%d,\"message\":\"%s\","
           "\"api\":\"%s\",\"params\":{\"wave_size\":%d,\"block_size\":%d,\"grid\":\"%s\",\"width\":%" PRId64
           ",\"guard\":%" PRId64 ",\"rows\":%" PRId64 ",\"rows_per_launch\":%" PRId64 ",\"stride\":%" PRId64
           ",\"start_row\":%" PRId64 ",\"launches\":%" PRId64 ",\"dst_type\":\"%s\",\"index_type\":\"%s\","
           "\"offset_math\":\"%s\",\"seed\":%" PRIu64 "},\"dst_bytes\":%.0f,\"steps_run\":%" PRId64
           ",\"first_failing_step\":%s%s}\n",
           g_status.c_str(), code, json_escape(g_message).c_str(), GPU_API_NAME, DFLASH_WAVE_SIZE, p.block_size,
           json_escape(p.grid).c_str(), p.width, p.guard, p.rows, p.rows_per_launch, p.stride, p.start_row, p.launches,
           json_escape(p.dst_type).c_str(), json_escape(p.index_type).c_str(), json_escape(p.offset_math).c_str(), p.seed,
           g_total_bytes, g_launches_run,
           g_first_fail < 0 ? "null" : std::to_string(g_first_fail).c_str(), facts.c_str());
    fflush(stdout);
    exit(code);
}

[[noreturn]] static void usage(const std::string & m) {
    fprintf(stderr, "setrows-kernel: usage error: %s\n"
                    "usage: setrows-kernel [--block-size 32..1024] [--grid exact|wave|oversubscribe] [--width W]\n"
                    "       [--guard G] [--rows N] [--rows-per-launch K] [--stride S] [--start-row R] [--launches L]\n"
                    "       [--dst-type f32|f16] [--index-type i64|i32] [--offset-math i64|i32] [--seed N]\n",
            m.c_str());
    g_status = "usage";
    g_message = m;
    finish(2);
}

#define GPU_CHECK(call)                                                                                   \
    do {                                                                                                  \
        gpuError_t e_ = (call);                                                                           \
        if (e_ != gpuSuccess) {                                                                           \
            fprintf(stderr, GPU_ERROR_PREFIX " %d (%s) at %s:%d: %s\n", (int) e_, gpuGetErrorString(e_), \
                    __FILE__, __LINE__, #call);                                                           \
            fflush(stderr);                                                                               \
            abort();                                                                                      \
        }                                                                                                 \
    } while (0)

static uint64_t splitmix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// Multiples of 1/16 in [-8, 8): exact in f16, never equal to the canary byte pattern.
static float value(uint64_t seed, int64_t launch, int64_t srow, int64_t col) {
    uint64_t h = splitmix(seed ^ splitmix((uint64_t) launch * 1000003ULL + (uint64_t) srow) ^ ((uint64_t) col << 20));
    return (float) ((int) (h % 256) - 128) / 16.0f;
}

static const uint8_t kCanary = 0xA5;

template <typename idx_t, typename dst_t>
static int run() {
    Params & p = g_p;
    const int64_t pitch = p.width + p.guard;  // elements per destination row
    const int64_t head = std::max<int64_t>(p.guard, 64), tail = head;
    const int64_t n_elems = head + p.rows * pitch + tail;
    const size_t esz = sizeof(dst_t);
    g_total_bytes = (double) (p.rows * pitch) * esz;

    int ndev = 0;
    if (gpuGetDeviceCount(&ndev) != gpuSuccess || ndev == 0) {
        g_status = "unsupported";
        g_message = "no " GPU_API_NAME " device";
        finish(3);
    }
    gpuDeviceProp prop;
    GPU_CHECK(gpuGetDeviceProperties(&prop, 0));
    g_dev_name = prop.name;
    g_dev_warp = prop.warpSize;
#if defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
    g_dev_arch = prop.gcnArchName;
#else
    g_dev_arch = "sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
#endif
    {
        DeviceFacts * d_facts = nullptr;
        DeviceFacts facts;
        memset(&facts, 0, sizeof facts);
        GPU_CHECK(gpuMalloc((void **) &d_facts, sizeof(DeviceFacts)));
        k_build_facts<<<1, 1>>>(d_facts);
        GPU_CHECK(gpuGetLastError());
        GPU_CHECK(gpuMemcpy(&facts, d_facts, sizeof facts, gpuMemcpyDeviceToHost));
        GPU_CHECK(gpuFree(d_facts));
        facts.arch[sizeof facts.arch - 1] = '\0';
        g_wave = facts.wave_size;
        g_arch = facts.arch[0] ? std::string(facts.arch)
                 : facts.cuda_arch > 0 ? "sm_" + std::to_string(facts.cuda_arch / 10) : std::string();
    }
    fprintf(stderr, "setrows-kernel: %s (%s), warpSize %d; device code: wave %d, arch %s; DFLASH_WAVE_SIZE %d; dst %.3f GiB (%" PRId64
            " elements)\n", prop.name, g_dev_arch.c_str(), prop.warpSize, g_wave, g_arch.c_str(), DFLASH_WAVE_SIZE,
            (double) n_elems * esz / (1 << 30), n_elems);

    dst_t * base = nullptr;
    gpuError_t me = gpuMalloc((void **) &base, n_elems * esz);
    if (me != gpuSuccess) {
        (void) gpuGetLastError();
        g_status = "unsupported";
        g_message = std::string("cannot allocate destination: ") + gpuGetErrorString(me);
        finish(3);
    }
    GPU_CHECK(gpuMemset(base, kCanary, n_elems * esz));
    dst_t * dst = base + head;

    float * d_src = nullptr;
    idx_t * d_idx = nullptr;
    GPU_CHECK(gpuMalloc((void **) &d_src, p.rows_per_launch * p.width * sizeof(float)));
    GPU_CHECK(gpuMalloc((void **) &d_idx, p.rows_per_launch * sizeof(idx_t)));

    const int64_t ne00 = p.width, ne01 = p.rows_per_launch, ne02 = 1, ne03 = 1, ne11 = 1, ne12 = 1;
    const int64_t ne_total = ne00 * ne01 * ne02 * ne03;
    int64_t nblocks = (ne_total + p.block_size - 1) / p.block_size;
    if (p.grid == "wave") {  // whole waves of DFLASH_WAVE_SIZE threads per block, rounded up
        const int64_t waves = (ne_total + DFLASH_WAVE_SIZE - 1) / DFLASH_WAVE_SIZE;
        nblocks = (waves * DFLASH_WAVE_SIZE + p.block_size - 1) / p.block_size;
    } else if (p.grid == "oversubscribe") {  // extra blocks: the bounds check must stop them
        nblocks = nblocks * 2 + 3;
    }
    const uint3 fd00 = init_fastdiv_values(ne00), fd01 = init_fastdiv_values(ne01), fd02 = init_fastdiv_values(ne02);
    const uint3 fd11 = init_fastdiv_values(ne11), fd12 = init_fastdiv_values(ne12);

    std::map<int64_t, std::pair<int64_t, int64_t>> written;  // dst row -> (launch, src row)
    std::vector<float> src(p.rows_per_launch * p.width);
    std::vector<idx_t> idx(p.rows_per_launch);
    std::vector<uint8_t> win;
    g_status = "pass";

    auto expect_bits = [&](float v, uint8_t * out) {
        if (sizeof(dst_t) == 4) {
            memcpy(out, &v, 4);
        } else {
            half h = __float2half(v);
            memcpy(out, &h, 2);
        }
    };
    auto fail = [&](int64_t launch, const char * what, int64_t elem) {
        const int64_t row = (elem - head) >= 0 ? (elem - head) / pitch : -1;
        const int64_t col = (elem - head) >= 0 ? (elem - head) % pitch : elem - head;
        char buf[256];
        snprintf(buf, sizeof buf, "launch=%" PRId64 " %s element=%" PRId64 " (row %" PRId64 ", col %" PRId64 ")", launch,
                 what, elem - head, row, col);
        printf("SETROWS_MISMATCH step=%" PRId64 " %s\n", launch, buf);
        fprintf(stderr, "setrows-kernel: first difference: %s\n", buf);
        g_status = "mismatch";
        g_message = buf;
        g_first_fail = launch;
        finish(1);
    };
    // Check [from, to) (element indices into the whole allocation) against the model.
    auto check_range = [&](int64_t launch, int64_t from, int64_t to) {
        from = std::max<int64_t>(0, from);
        to = std::min<int64_t>(n_elems, to);
        if (to <= from) return;
        win.resize((to - from) * esz);
        GPU_CHECK(gpuMemcpy(win.data(), base + from, win.size(), gpuMemcpyDeviceToHost));
        uint8_t e[4];
        uint8_t canary[4];
        memset(canary, kCanary, sizeof canary);
        for (int64_t j = from; j < to; j++) {
            const uint8_t * got = win.data() + (j - from) * esz;
            const int64_t rel = j - head;
            const uint8_t * want = canary;
            const char * what = "canary overwritten";
            if (rel >= 0 && rel < p.rows * pitch && rel % pitch < p.width) {
                auto it = written.find(rel / pitch);
                if (it != written.end()) {
                    expect_bits(value(p.seed, it->second.first, it->second.second, rel % pitch), e);
                    want = e;
                    what = "written row does not hold its values";
                }
            }
            if (memcmp(got, want, esz) != 0) fail(launch, what, j);
        }
    };

    for (int64_t l = 0; l < p.launches; l++) {
        for (int64_t j = 0; j < p.rows_per_launch; j++) {
            const int64_t row = (p.start_row + (l * p.rows_per_launch + j) * p.stride) % p.rows;
            idx[j] = (idx_t) row;
            for (int64_t c = 0; c < p.width; c++) src[j * p.width + c] = value(p.seed, l, j, c);
        }
        GPU_CHECK(gpuMemcpy(d_src, src.data(), src.size() * sizeof(float), gpuMemcpyHostToDevice));
        GPU_CHECK(gpuMemcpy(d_idx, idx.data(), idx.size() * sizeof(idx_t), gpuMemcpyHostToDevice));
        const int64_t s01 = p.width, s02 = s01 * ne01, s03 = s02, s10 = 1, s11 = ne01, s12 = ne01;
        const int64_t s1 = pitch, s2 = pitch * p.rows, s3 = s2;
        if (p.offset_math == "i32") {
            k_set_rows<idx_t, dst_t, true><<<dim3((unsigned) nblocks), dim3(p.block_size)>>>(
                d_src, d_idx, dst, ne_total, s01, s02, s03, s10, s11, s12, s1, s2, s3, fd00, fd01, fd02, fd11, fd12);
        } else {
            k_set_rows<idx_t, dst_t, false><<<dim3((unsigned) nblocks), dim3(p.block_size)>>>(
                d_src, d_idx, dst, ne_total, s01, s02, s03, s10, s11, s12, s1, s2, s3, fd00, fd01, fd02, fd11, fd12);
        }
        GPU_CHECK(gpuGetLastError());
        GPU_CHECK(gpuDeviceSynchronize());
        for (int64_t j = 0; j < p.rows_per_launch; j++) written[(int64_t) idx[j]] = {l, j};
        g_launches_run = l + 1;
        // the rows written now, one row either side, and the bands at both ends of the allocation
        for (int64_t j = 0; j < p.rows_per_launch; j++) {
            const int64_t r = (int64_t) idx[j];
            check_range(l, head + (r - 1) * pitch, head + (r + 2) * pitch);
        }
        check_range(l, 0, head + pitch);
        check_range(l, head + (p.rows - 1) * pitch, n_elems);
    }
    // every row ever written must still hold its last values
    for (const auto & kv : written) check_range(p.launches - 1, head + kv.first * pitch, head + (kv.first + 1) * pitch);
    GPU_CHECK(gpuFree(base));
    GPU_CHECK(gpuFree(d_src));
    GPU_CHECK(gpuFree(d_idx));
    g_message = "all launches wrote exactly their rows; canaries intact";
    fprintf(stderr, "setrows-kernel: pass, %" PRId64 " launches, grid %" PRId64 " x %d\n", g_launches_run, nblocks, p.block_size);
    finish(0);
}

static bool parse_i64(const char * s, int64_t & out) {
    char * end = nullptr;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0') return false;
    out = v;
    return true;
}

int main(int argc, char ** argv) {
    Params & p = g_p;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (i + 1 >= argc) usage("flag " + a + " needs a value (or is unknown)");
        const char * v = argv[++i];
        int64_t n = 0;
        auto num = [&](int64_t lo, int64_t hi) {
            if (!parse_i64(v, n) || n < lo || n > hi) usage("flag " + a + ": '" + v + "' is out of range");
            return n;
        };
        if (a == "--block-size") p.block_size = (int) num(32, 1024);
        else if (a == "--grid") p.grid = v;
        else if (a == "--width") p.width = num(1, INT64_C(1) << 24);
        else if (a == "--guard") p.guard = num(0, INT64_C(1) << 20);
        else if (a == "--rows") p.rows = num(1, INT64_C(1) << 40);
        else if (a == "--rows-per-launch") p.rows_per_launch = num(1, 1 << 16);
        else if (a == "--stride") p.stride = num(1, INT64_C(1) << 40);
        else if (a == "--start-row") p.start_row = num(0, INT64_C(1) << 40);
        else if (a == "--launches") p.launches = num(1, INT64_C(1) << 30);
        else if (a == "--dst-type") p.dst_type = v;
        else if (a == "--index-type") p.index_type = v;
        else if (a == "--offset-math") p.offset_math = v;
        else if (a == "--seed") p.seed = (uint64_t) num(0, INT64_MAX);
        else usage("unknown flag " + a);
    }
    if (p.grid != "exact" && p.grid != "wave" && p.grid != "oversubscribe") usage("--grid must be exact, wave or oversubscribe");
    if (p.block_size % DFLASH_WAVE_SIZE != 0)
        usage("--block-size " + std::to_string(p.block_size) + " is not a multiple of DFLASH_WAVE_SIZE=" + std::to_string(DFLASH_WAVE_SIZE));
    if (p.offset_math != "i64" && p.offset_math != "i32") usage("--offset-math must be i64 or i32");
    if (p.rows_per_launch > p.rows) usage("--rows-per-launch exceeds --rows");
    if (p.width * p.rows_per_launch >= (INT64_C(1) << 32)) usage("width*rows-per-launch must stay below 2^32 (ggml's 32-bit fastdiv)");
    const bool f16 = p.dst_type == "f16";
    if (!f16 && p.dst_type != "f32") usage("--dst-type must be f32 or f16");
    if (p.index_type == "i64") return f16 ? run<int64_t, half>() : run<int64_t, float>();
    if (p.index_type == "i32") {
        if (p.rows > INT32_MAX) usage("--index-type i32 cannot address more than 2^31-1 rows");
        return f16 ? run<int32_t, half>() : run<int32_t, float>();
    }
    usage("--index-type must be i64 or i32");
}
