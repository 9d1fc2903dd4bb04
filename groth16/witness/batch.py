"""The batch helper module, in WebAssembly text, instantiated beside each circuit.

Each call from Python into WebAssembly costs tens of microseconds, and the circom protocol takes
one call per input value (setInputSignal) and n32 + 1 per witness value (getWitness,
readSharedRWMemory): 2^16 witness values would cost seconds in calls alone. This module imports
those exports of the circuit and loops over them inside WebAssembly, so a whole witness costs two
calls from Python. It has its own memory: the circuit's memory is touched only through the
circuit's own exports.

(Kept as a string, not a .wat file, so that it ships with the package without package-data.)
"""

WAT = r"""
(module
  (import "circuit" "getWitness" (func $getWitness (param i32)))
  (import "circuit" "readSharedRWMemory" (func $readShared (param i32) (result i32)))
  (import "circuit" "writeSharedRWMemory" (func $writeShared (param i32 i32)))
  (import "circuit" "setInputSignal" (func $setInputSignal (param i32 i32 i32)))
  (memory (export "memory") 1)

  ;; setInputs(count, n32): sets `count` input values. Record k starts at 8 + k * (12 + 4 * n32):
  ;; hash MSB u32, hash LSB u32, index u32, then the value as n32 little-endian u32 words.
  ;; Address 0 holds the number of the record being set, so a trap names its input.
  (func (export "setInputs") (param $count i32) (param $n32 i32)
    (local $k i32) (local $j i32) (local $p i32)
    (local.set $p (i32.const 8))
    (block $done
      (loop $record
        (br_if $done (i32.ge_u (local.get $k) (local.get $count)))
        (i32.store (i32.const 0) (local.get $k))
        (local.set $j (i32.const 0))
        (block $copied
          (loop $word
            (br_if $copied (i32.ge_u (local.get $j) (local.get $n32)))
            (call $writeShared (local.get $j)
              (i32.load offset=12 (i32.add (local.get $p) (i32.shl (local.get $j) (i32.const 2)))))
            (local.set $j (i32.add (local.get $j) (i32.const 1)))
            (br $word)))
        ;; the call that sets the last input also runs the circuit
        (call $setInputSignal (i32.load (local.get $p)) (i32.load offset=4 (local.get $p))
                              (i32.load offset=8 (local.get $p)))
        (local.set $p (i32.add (local.get $p) (i32.add (i32.const 12) (i32.shl (local.get $n32) (i32.const 2)))))
        (local.set $k (i32.add (local.get $k) (i32.const 1)))
        (br $record))))

  ;; readWitness(count, n32): witness values 0..count-1 to address 0 onwards, n32 words each,
  ;; in standard form (getWitness converts them), as a .wtns file's section 2 holds them.
  (func (export "readWitness") (param $count i32) (param $n32 i32)
    (local $i i32) (local $j i32) (local $p i32)
    (block $done
      (loop $value
        (br_if $done (i32.ge_u (local.get $i) (local.get $count)))
        (call $getWitness (local.get $i))
        (local.set $j (i32.const 0))
        (block $copied
          (loop $word
            (br_if $copied (i32.ge_u (local.get $j) (local.get $n32)))
            (i32.store (local.get $p) (call $readShared (local.get $j)))
            (local.set $p (i32.add (local.get $p) (i32.const 4)))
            (local.set $j (i32.add (local.get $j) (i32.const 1)))
            (br $word)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $value))))
)
"""
