pragma circom 2.2.0;
// Built by tests/test_witness.py: bus inputs (circom 2.2), named "p[0].x", "q.y" by circom's
// generated witness_calculator.js, which the test compares against (snarkjs 0.7.6 cannot read them).
bus Point() {
    signal x;
    signal y;
}
template Main() {
    input Point() p[2];
    input Point() q;
    signal input s;
    signal output out;
    signal t <== p[0].x * p[1].y;
    out <== t + q.x * s + q.y;
}
component main = Main();
