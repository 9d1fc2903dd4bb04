pragma circom 2.1.0;
// Built by the interop tests with circom2 at test time, on both curves. It mixes a bit
// decomposition (many 0/1 witness values, i.e. zero scalars and bare points in the MSMs)
// with a multiplication chain (full-size scalars), and has 8 public signals.
template Interop(NMUL, NPUB) {
    signal input pub[NPUB];
    signal input x;
    signal output out;
    signal output popcount;

    signal bits[64];
    var acc = 0;
    var weight = 1;
    var count = 0;
    for (var i = 0; i < 64; i++) {
        bits[i] <-- (x >> i) & 1;
        bits[i] * (bits[i] - 1) === 0;
        acc += bits[i] * weight;
        count += bits[i];
        weight *= 2;
    }
    acc === x;

    signal s[NMUL + 1];
    s[0] <== x;
    for (var i = 0; i < NMUL; i++) {
        s[i + 1] <== s[i] * (s[i] + pub[i % NPUB]);
    }
    out <== s[NMUL] * pub[0];
    popcount <== count;
}
component main {public [pub]} = Interop(3950, 6);
