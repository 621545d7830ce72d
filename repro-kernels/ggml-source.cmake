# The probed ggml built from source (add_subdirectory): ONE rule for the replay and the decode
# probe. The decode probe adds it before llama.cpp, which then takes this ggml target instead of
# adding its own (llama.cpp's CMakeLists: "otherwise assume ggml is added by a parent"). Same
# options, same shared libraries, same compile commands in both build trees: a decode probe after
# a replay of the same tree and work dir compiles none of ggml again (ccache hits, HIP's long
# device code included).
macro(setrows_add_ggml dir)
    if (NOT EXISTS "${dir}/CMakeLists.txt" OR NOT EXISTS "${dir}/include/ggml.h")
        message(FATAL_ERROR "${dir} is not a ggml source tree (no CMakeLists.txt or include/ggml.h)")
    endif()
    # Only the library: ggml's own tests and examples are not needed to run a probe.
    set(GGML_BUILD_TESTS OFF CACHE BOOL "" FORCE)
    set(GGML_BUILD_EXAMPLES OFF CACHE BOOL "" FORCE)
    set(GGML_STANDALONE OFF CACHE BOOL "" FORCE)
    add_subdirectory("${dir}" ggml EXCLUDE_FROM_ALL)
endmacro()
