"""Random-input reference values for tests/pbgi.rs (`MPMATH` table), 60-digit mpmath.

Run: python3 gen_pbgi_reference.py > table.rs, then paste. Inputs are f64 values (printed with
repr, so they round-trip exactly); L = log(lc) - log(sigma) is formed in high precision from them.
"""
import mpmath as mp, random
mp.mp.dps = 60
random.seed(12345)
def h(u): return mp.npdf(u) + u*mp.ncdf(u)
rows = []
for i in range(48):
    mu = (random.random()-0.5)*10 * 10**random.uniform(-3, 6)
    s = 10**random.uniform(-12, 6)
    llc = random.uniform(-300, 2.2) * 2.302585092994046 + (0 if i % 6 else 0)
    if i % 8 == 7:
        llc = mp.log(s) + random.uniform(-5, 2.3)  # near u ~ 0..10
        llc = float(llc)
    mu, s, llc = float(mu), float(s), float(llc)
    L = mp.mpf(llc) - mp.log(mp.mpf(s))
    if L > 2.31: continue
    f = lambda u: mp.log(h(u)) - L
    # bracket in u
    lo, hi = mp.mpf(-60), mp.mpf(20)
    if L < -1500: lo = -mp.sqrt(-2*L) - 1
    for _ in range(400):
        m = (lo+hi)/2
        if f(m) < 0: lo = m
        else: hi = m
    u = (lo+hi)/2
    u = mp.findroot(f, u)
    g = mp.mpf(mu) - mp.mpf(s)*u
    dsig = mp.npdf(u)/mp.ncdf(u)
    dl = -mp.exp(mp.mpf(llc))/mp.ncdf(u)
    rows.append((mu, s, llc, mp.nstr(g, 20), mp.nstr(u, 20), mp.nstr(dsig, 20), mp.nstr(dl, 20)))
print("const MPMATH: [[&str; 7]; %d] = [" % len(rows))
for r in rows:
    print("    [%s]," % ", ".join('"%s"' % (repr(x) if isinstance(x, float) else x) for x in r))
print("];")
