"""The polynomials of gdn_math.h's fast paths: near-minimax (Chebyshev) fits by mpmath, rounded to double, printed as
C hex literals with their measured maximum error (relative, or absolute where said) over a dense grid.

    /work/venv/bin/python dev/math_coeffs.py
"""
import mpmath as mp

mp.mp.prec = 200


def fit(name, f, a, b, n, rel=True):
    poly, _ = mp.chebyfit(f, [a, b], n + 1, error=True)  # highest degree first
    c = [float(x) for x in reversed(poly)]
    worst = mp.mpf(0)
    for i in range(4001):
        x = mp.mpf(a) + (mp.mpf(b) - a) * i / 4000
        p = mp.mpf(0)
        for ci in reversed(c):
            p = p * x + mp.mpf(ci)
        e = abs(p - f(x))
        if rel:
            e /= abs(f(x))
        worst = max(worst, e)
    print("/* %s: degree %d on [%s, %s], max %s error 2^%.1f */" % (
        name, n, mp.nstr(a, 8), mp.nstr(b, 8), "relative" if rel else "absolute", float(mp.log(worst, 2))))
    print("{" + ", ".join(float.hex(x) for x in c) + "}")


ln2 = mp.log(2)
r_max = (mp.mpf(0.5) + mp.mpf(2) ** -40) * ln2 / 4
fit("e^r", mp.exp, -r_max, r_max, 7)
fit("1/(2 + f)", lambda f: 1 / (2 + f), mp.sqrt(0.5) - 1, mp.sqrt(2) - 1, 7)


def atanh_tail(z):  # (2 atanh(s) - 2 s) / (s z), s = sqrt(z)
    if z == 0:
        return mp.mpf(2) / 3
    s = mp.sqrt(z)
    return (2 * mp.atanh(s) - 2 * s) / (s * z)


s_max = (mp.sqrt(2) - 1) / (mp.sqrt(2) + 1)
fit("atanh tail", atanh_tail, 0, s_max ** 2 * (1 + mp.mpf(2) ** -40), 6, rel=False)
fit("1/(1 + t)", lambda t: 1 / (1 + t), 0, 1, 7)
fit("1/sqrt(w)", lambda w: 1 / mp.sqrt(w), 1, 2, 7)
