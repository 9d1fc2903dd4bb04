pragma circom 2.1.0;
// Built by tests/test_witness.py with circom2 on both curves: a 2-D and a 1-D array input,
// a scalar, an `assert` the inputs can break (in a sub-template, so circom names it), and log().
template Check(LIMIT) {
    signal input k;
    assert(k < LIMIT);
}
template Rows(N) {
    signal input in[N];
    signal output out;
    var acc = 0;
    for (var i = 0; i < N; i++) {
        acc += in[i];
    }
    out <== acc;
}
template Witness(R, C) {
    signal input m[R][C];
    signal input v[C];
    signal input k;
    signal output dot[R];
    signal output total;
    signal prod[R][C];
    component rows[R];
    for (var i = 0; i < R; i++) {
        rows[i] = Rows(C);
        for (var j = 0; j < C; j++) {
            prod[i][j] <== m[i][j] * v[j];
            rows[i].in[j] <== prod[i][j];
        }
        dot[i] <== rows[i].out;
    }
    component check = Check(1000);
    check.k <== k;
    signal kk <== k * k;
    total <== kk + dot[0];
    log("k squared", kk);
}
component main {public [v]} = Witness(3, 4);
