#pragma once
// Non-template functions that the compiled mode keeps out of the programs that use them
// (include/depthlab/compiled.hpp does that for templates, with `extern template`; a plain
// inline function has no such switch). A header declares such a function in its class, and
// defines it after the class inside `#if DEPTHLAB_DEFINE_OUT_OF_LINE`, marked
// DEPTHLAB_OUT_OF_LINE:
//   - header-only (the default): defined in every translation unit, inline;
//   - DEPTHLAB_COMPILED (a program linking depthlab::compiled) and the library's template
//     files (DEPTHLAB_COMPILED_LIBRARY): declared only; the linker takes the library's copy;
//   - DEPTHLAB_COMPILED_OUT_OF_LINE (src/compiled/out_of_line.cpp alone): defined once,
//     not inline.
// Worth it for functions that pull in heavy templates of another library (the JSON parser of
// the safetensors reader: ~1.5 s of every program that opens a checkpoint).
#if defined(DEPTHLAB_COMPILED_OUT_OF_LINE)
#define DEPTHLAB_DEFINE_OUT_OF_LINE 1
#define DEPTHLAB_OUT_OF_LINE
#elif defined(DEPTHLAB_COMPILED) || defined(DEPTHLAB_COMPILED_LIBRARY)
#define DEPTHLAB_DEFINE_OUT_OF_LINE 0
#define DEPTHLAB_OUT_OF_LINE
#else
#define DEPTHLAB_DEFINE_OUT_OF_LINE 1
#define DEPTHLAB_OUT_OF_LINE inline
#endif
