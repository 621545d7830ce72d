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
    # ggml asks git for its commit and whether its tree is dirty, and 0.9.x takes any failure
    # as dirty: a private checkout is no repository (git fails, "0.9.3-dirty"), or sits in one
    # that does not track it (another repository's commit and state). Git answers only where
    # it tracks this very tree; elsewhere it is not asked (the tool knows the commit).
    find_program(SETROWS_GIT NAMES git NO_CMAKE_FIND_ROOT_PATH)
    set(_setrows_tracked 1)
    if (SETROWS_GIT)
        execute_process(COMMAND ${SETROWS_GIT} ls-files --error-unmatch CMakeLists.txt
            WORKING_DIRECTORY "${dir}" RESULT_VARIABLE _setrows_tracked
            OUTPUT_QUIET ERROR_QUIET)
    endif()
    if (_setrows_tracked EQUAL 0)
        unset(GIT_EXE CACHE)
    else()
        # `cmake -E true` ignores its arguments: no commit, exit 0, so not dirty.
        set(GIT_EXE "${CMAKE_COMMAND};-E;true" CACHE STRING "" FORCE)
    endif()
    # Only the library: ggml's own tests and examples are not needed to run a probe.
    set(GGML_BUILD_TESTS OFF CACHE BOOL "" FORCE)
    set(GGML_BUILD_EXAMPLES OFF CACHE BOOL "" FORCE)
    set(GGML_STANDALONE OFF CACHE BOOL "" FORCE)
    add_subdirectory("${dir}" ggml EXCLUDE_FROM_ALL)
endmacro()
