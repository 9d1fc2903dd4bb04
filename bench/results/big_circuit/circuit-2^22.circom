pragma circom 2.1.0;
// make_fixture.sh's chain, 4194296 multiplications s[i+1] = s[i]*(s[i]+pub[i%4]) (+ 1 for 'mid'),
// in components of 1024: one template with a signal array of 2^22 takes circom2 time quadratic
// in its length (2^16: 20 s, 2^17: 80 s here), blocks of 1024 take it linear (2^18: 9 s).
template Block(B) {
    signal input in;
    signal input pub[4];
    signal output out;
    signal s[B+1];
    s[0] <== in;
    for (var i = 0; i < B; i++) {
        s[i+1] <== s[i] * (s[i] + pub[i % 4]);
    }
    out <== s[B];
}
template MulChain(K, B, R) {
    signal input pub[4];
    signal input x;
    signal output out;
    signal output mid;
    component blk[K + 1];
    signal h[K + 2];
    h[0] <== x;
    for (var k = 0; k <= K; k++) {
        blk[k] = Block(k < K ? B : R);
        blk[k].in <== h[k];
        for (var j = 0; j < 4; j++) blk[k].pub[j] <== pub[j];
        h[k+1] <== blk[k].out;
    }
    mid <== h[K+1] * pub[0];
    out <== h[K+1] + x;
}
component main {public [pub]} = MulChain(4095, 1024, 1016);
