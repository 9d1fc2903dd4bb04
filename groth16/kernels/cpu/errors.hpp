// errors.hpp - return codes of the native CPU kernels' C ABI.
// Mirrored in groth16/backends/cpu.py (_ERRORS); keep both in step.
#pragma once

#define ZKQ_OK 0
#define ZKQ_ERR_CURVE 1             // unknown curve id
#define ZKQ_ERR_ARG 2               // bad argument (null pointer, unknown field id / limb width)
#define ZKQ_ERR_SIZE 3              // NTT size not a power of two or above the field's 2-adicity
#define ZKQ_ERR_ALLOC 4             // out of memory
#define ZKQ_ERR_INTERNAL 5          // unexpected C++ exception
#define ZKQ_ERR_SCALAR_RANGE 6      // an MSM scalar is >= r
#define ZKQ_ERR_CANCELLED 7         // the caller cancelled the call (zkq_prove's cancel flag)
#define ZKQ_ERR_COEF_MATRIX 10      // coefficient entry: matrix not 0 (A) or 1 (B)
#define ZKQ_ERR_COEF_CONSTRAINT 11  // coefficient entry: constraint >= domain size
#define ZKQ_ERR_COEF_SIGNAL 12      // coefficient entry: signal >= number of variables
#define ZKQ_ERR_COEF_VALUE 13       // coefficient entry: value >= r
#define ZKQ_ERR_POINT_RANGE 20      // point coordinate >= q
#define ZKQ_ERR_POINT_CURVE 21      // point not on the curve
#define ZKQ_ERR_SETUP_TRUNC 30      // setup: the .r1cs constraint section ends inside a constraint
#define ZKQ_ERR_SETUP_SIGNAL 31     // setup: a .r1cs term names a signal >= the number of wires
