// Memory placement of the replay's buffers, and the runtime's own word on where each one lives.
//
// Why it exists: on an APU (Strix Halo) ggml can keep tensors in host memory that the GPU reads
// and writes in place (an integrated device accepts the host buffer type), or turn every device
// allocation into managed memory (GGML_CUDA_ENABLE_UNIFIED_MEMORY, older trees GGML_HIP_UMA).
// A pass under a placement counts only if that placement took effect, so the replay reports, per
// buffer, the buffer type ggml gave it and what the CUDA/HIP runtime says of its pointer; the
// orchestrator compares that with what was asked. Nothing here is inferred from flags.
#pragma once

#include "ggml-backend.h"

#include <string>
#include <vector>

#if SETROWS_HAVE_CUDA_RT
#include <cuda_runtime_api.h>
#elif SETROWS_HAVE_HIP_RT
#include <hip/hip_runtime_api.h>
#endif

namespace placement {

// What the runtime says of one pointer: "device", "managed", "host", "unregistered", "error", or
// empty when this build has no GPU runtime to ask (CPU builds).
struct PointerFacts {
    std::string kind;
    int code = -1;  // the runtime's own memory-type value (CUDA: 1 host, 2 device, 3 managed)
};

inline const char * api_name() {
#if SETROWS_HAVE_CUDA_RT
    return "cudaPointerGetAttributes";
#elif SETROWS_HAVE_HIP_RT
    return "hipPointerGetAttributes";
#else
    return "";
#endif
}

inline PointerFacts pointer_facts(const void * p) {
    PointerFacts f;
#if SETROWS_HAVE_CUDA_RT
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void) cudaGetLastError();
        f.kind = "error";
        return f;
    }
    f.code = (int) a.type;
    switch (a.type) {
        case cudaMemoryTypeDevice: f.kind = "device"; break;
        case cudaMemoryTypeManaged: f.kind = "managed"; break;
        case cudaMemoryTypeHost: f.kind = "host"; break;
        default: f.kind = "unregistered"; break;
    }
#elif SETROWS_HAVE_HIP_RT
    hipPointerAttribute_t a;
    if (hipPointerGetAttributes(&a, p) != hipSuccess) {
        // HIP answers an error for memory it does not know (plain malloc'd host memory)
        (void) hipGetLastError();
        f.kind = "unregistered";
        return f;
    }
    // ROCm 6 renamed memoryType to type and renumbered the enum: compare by name (probed field);
    // managed memory is told by isManaged (hipMemoryTypeManaged is missing before ROCm 6).
    const auto t = a.SETROWS_HIP_ATTR_TYPE_FIELD;
    f.code = (int) t;
    if (a.isManaged) {
        f.kind = "managed";
    } else if (t == hipMemoryTypeDevice) {
        f.kind = "device";
    } else if (t == hipMemoryTypeHost) {
        f.kind = "host";
    } else {
        f.kind = "unregistered";
    }
#else
    (void) p;
#endif
    return f;
}

// One buffer the replay allocated: its role, ggml's buffer type, and the runtime's facts.
struct BufferFacts {
    std::string name, role, buft;
    bool is_host = false;
    PointerFacts ptr;
};

inline BufferFacts describe(const char * name, const char * role, ggml_backend_buffer_t buf, const void * data) {
    BufferFacts b;
    b.name = name;
    b.role = role;
    b.buft = ggml_backend_buft_name(ggml_backend_buffer_get_type(buf));
    b.is_host = ggml_backend_buffer_is_host(buf);
    b.ptr = pointer_facts(data);
    return b;
}

// `"memory":{...}` for the result line; `esc` is the caller's JSON string escaper.
template <class Esc>
std::string json(const std::string & requested, const std::vector<BufferFacts> & bufs, Esc esc) {
    const std::string api = api_name();
    std::string o = ",\"memory\":{\"requested\":\"" + esc(requested) + "\",\"pointer_api\":" +
                    (api.empty() ? std::string("null") : "\"" + api + "\"") + ",\"buffers\":[";
    for (size_t i = 0; i < bufs.size(); i++) {
        const BufferFacts & b = bufs[i];
        o += (i ? "," : "") + std::string("{\"name\":\"") + esc(b.name) + "\",\"role\":\"" + b.role + "\",\"buft\":\"" +
             esc(b.buft) + "\",\"is_host\":" + (b.is_host ? "true" : "false") + ",\"pointer\":" +
             (b.ptr.kind.empty() ? std::string("null") : "\"" + b.ptr.kind + "\"") + ",\"pointer_code\":" +
             (b.ptr.kind.empty() ? std::string("null") : std::to_string(b.ptr.code)) + "}";
    }
    return o + "]}";
}

}  // namespace placement
