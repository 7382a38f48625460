// W8 peer: the GMM log-posterior with a Wishart prior and its gradient, hand-written C++.
//
// The objective of bench/w8_gmm.py (GradBench's gmm, ADBench section 4.1 with the corrected
// prior sign), double precision, single-threaded, no libraries beyond libm. The gradient is
// reverse mode derived by hand (bench/w8_gmm.py `gmm_numpy` states the same formulas):
//
//   Q_k   lower triangular, diagonal exp(q_k), strictly lower part l_k (column by column)
//   z_ki  = Q_k (x_i - mu_k),  inner_ki = alpha_k + sum_j q_kj - |z_ki|^2 / 2
//   r_ki  = softmax_k(inner_ki),  w_ki = r_ki z_ki
//   df/dalpha_k = sum_i r_ki - n softmax(alpha)_k
//   df/dmu_k    = Q_k^T sum_i w_ki
//   dQ_k        = -sum_i w_ki (x_i - mu_k)^T        (lower triangle only)
//   df/dq_kj    = dQ_k[j][j] exp(q_kj) + sum_i r_ki - gamma^2 exp(2 q_kj) + m
//   df/dl_k     = dQ_k (strictly lower, same order as l_k) - gamma^2 l_k
//
// Layout: the data are processed in blocks of up to B points, stored transposed (d rows of
// B points each), so that every inner loop runs over points: contiguous and long, one point
// per vector lane (no -ffast-math is needed: no sum is reassociated by the compiler). Inside a
// block, component by component (Q_k, its adjoint dQ_k and the block stay in cache), a
// forward sweep computes and stores z_k (d x B) and inner_k; the block's log-sum-exp over
// components gives r; a reverse sweep over components forms w = r z and accumulates
// sum_i w and dQ_k. The sums over points (dQ entries, sum_i w, sum_i r) are dot products
// with 2 VW or 8 VW independent partial sums (an explicit, fixed summation order), and rows
// are padded with zeros to a multiple of LANES so no loop has a scalar tail; padded points
// have x - mu = 0, hence z = w = 0, and r = 0. Block size: 128 points, or fewer so that the
// stored z (K x d x B) stays within 16 MiB, but at least 64 (chosen by timing 64-1024 here).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

namespace {

// log Gamma_d(a) = d(d-1)/4 log pi + sum_{j=1..d} lgamma(a + (1 - j)/2)
double log_multigamma(int d, double a) {
    double s = 0.25 * d * (d - 1) * std::log(M_PI);
    for (int j = 1; j <= d; ++j) s += std::lgamma(a + 0.5 * (1 - j));
    return s;
}

// The inner loops use GCC's vector extension (vector_size, understood by GCC and Clang): VW
// doubles per vector, one point per lane, so the arithmetic per point is the scalar formula
// and a sum over points is VW (or more) independent partial sums added at the end in a fixed
// order. Written this way because GCC -O3 vectorized the plain-loop form of dot4 below with
// lane permutations (55% of the time at d = 64, measured with perf).
constexpr int VW = 8;
typedef double vd __attribute__((vector_size(VW * sizeof(double))));
// points per tile of the forward product (four vectors of partial sums in registers)
constexpr int LANES = 4 * VW;
// bytes of the stored z of a block (K x d x B doubles), which chooses B
constexpr std::size_t BLOCK_BYTES = 16u << 20;
constexpr int MIN_BLOCK = 64, MAX_BLOCK = 128;

inline vd load(const double* p) { vd v; std::memcpy(&v, p, sizeof v); return v; }
inline void store(double* p, vd v) { std::memcpy(p, &v, sizeof v); }
inline vd splat(double x) { vd v; for (int l = 0; l < VW; ++l) v[l] = x; return v; }
inline double hsum(vd v) { double s = 0.0; for (int l = 0; l < VW; ++l) s += v[l]; return s; }

// sum_t x[t], len a multiple of 2 VW
inline double sum(const double* x, int len) {
    vd s0 = splat(0.0), s1 = s0;
    for (int t = 0; t < len; t += 2 * VW) { s0 += load(x + t); s1 += load(x + t + VW); }
    return hsum(s0 + s1);
}

// out[j] = sum_t w[t] y_j[t] for the four rows y_0..y_3 (row stride `stride`), len a multiple of 2 VW
inline void dot4(const double* w, const double* y, std::size_t stride, int len, double* out) {
    vd a[8];
    for (auto& v : a) v = splat(0.0);
    const double* y0 = y; const double* y1 = y + stride; const double* y2 = y + 2 * stride;
    const double* y3 = y + 3 * stride;
    for (int t = 0; t < len; t += 2 * VW) {
        const vd v = load(w + t), u = load(w + t + VW);
        a[0] += v * load(y0 + t); a[1] += v * load(y1 + t); a[2] += v * load(y2 + t); a[3] += v * load(y3 + t);
        a[4] += u * load(y0 + t + VW); a[5] += u * load(y1 + t + VW);
        a[6] += u * load(y2 + t + VW); a[7] += u * load(y3 + t + VW);
    }
    for (int j = 0; j < 4; ++j) out[j] = hsum(a[j] + a[j + 4]);
}

}  // namespace

extern "C" {

// Objective and gradient. Arrays are C-contiguous float64: alphas (k), means (k, d),
// icf (k, d + d(d-1)/2), x (n, d); outputs g_alphas (k), g_means (k, d), g_icf (k, p).
// Returns the objective.
double gmm_objective_grad(int d, int k, int n, const double* alphas, const double* means,
                          const double* icf, const double* x, double gamma, int m,
                          double* g_alphas, double* g_means, double* g_icf) {
    const int p = d + d * (d - 1) / 2;
    const std::size_t dd = static_cast<std::size_t>(d) * d;
    const double g2 = gamma * gamma;

    // Q_k row-major and dense (zeros above the diagonal), sum_j q_kj
    std::vector<double> Qm(static_cast<std::size_t>(k) * dd, 0.0), dQm(static_cast<std::size_t>(k) * dd, 0.0);
    std::vector<double> sumq(k, 0.0), rsum(k, 0.0), sw(static_cast<std::size_t>(k) * d, 0.0);
    for (int c = 0; c < k; ++c) {
        const double* q = icf + static_cast<std::size_t>(c) * p;
        double* Q = Qm.data() + c * dd;
        int li = d;
        for (int b = 0; b < d; ++b) {
            Q[b * d + b] = std::exp(q[b]);
            sumq[c] += q[b];
            for (int a = b + 1; a < d; ++a) Q[a * d + b] = q[li++];
        }
    }

    // block of B points (a multiple of LANES); rows of d4 >= d (a multiple of 4) for dot4
    const std::size_t per_point = std::max<std::size_t>(1, static_cast<std::size_t>(k) * d * sizeof(double));
    int B = static_cast<int>(std::min<std::size_t>(MAX_BLOCK, BLOCK_BYTES / per_point));
    B = std::max(B, MIN_BLOCK);
    B = std::min(B, (n + LANES - 1) / LANES * LANES);
    B = (B + LANES - 1) / LANES * LANES;
    const int d4 = (d + 3) / 4 * 4;
    const std::size_t zs = static_cast<std::size_t>(d) * B;     // one component's z
    std::vector<double> Z(static_cast<std::size_t>(k) * zs), inner(static_cast<std::size_t>(k) * B);
    std::vector<double> XT(zs), XcT(static_cast<std::size_t>(d4) * B, 0.0), acc(B), hi(B), se(B);

    double slse = 0.0;
    for (int i0 = 0; i0 < n; i0 += B) {
        const int nb = std::min(B, n - i0);
        for (int b = 0; b < d; ++b) {
            double* row = XT.data() + static_cast<std::size_t>(b) * B;
            for (int t = 0; t < nb; ++t) row[t] = x[static_cast<std::size_t>(i0 + t) * d + b];
        }
        // forward sweep: z_k = Q_k (x - mu_k), inner_k, for each component
        for (int c = 0; c < k; ++c) {
            const double* Q = Qm.data() + c * dd;
            const double* mu = means + static_cast<std::size_t>(c) * d;
            double* z = Z.data() + c * zs;
            for (int b = 0; b < d; ++b) {               // padded points: x - mu = 0
                const double* xr = XT.data() + static_cast<std::size_t>(b) * B;
                double* xc = XcT.data() + static_cast<std::size_t>(b) * B;
                for (int t = 0; t < nb; ++t) xc[t] = xr[t] - mu[b];
                for (int t = nb; t < B; ++t) xc[t] = 0.0;
            }
            for (int t = 0; t < B; ++t) acc[t] = 0.0;
            for (int a = 0; a < d; ++a) {
                double* za = z + static_cast<std::size_t>(a) * B;
                const double* Qa = Q + a * d;
                for (int t0 = 0; t0 < B; t0 += LANES) {    // LANES partial sums held in registers over b
                    vd r0 = splat(0.0), r1 = r0, r2 = r0, r3 = r0;
                    for (int b = 0; b <= a; ++b) {
                        const vd qab = splat(Qa[b]);
                        const double* xc = XcT.data() + static_cast<std::size_t>(b) * B + t0;
                        r0 += qab * load(xc); r1 += qab * load(xc + VW);
                        r2 += qab * load(xc + 2 * VW); r3 += qab * load(xc + 3 * VW);
                    }
                    double* zt = za + t0;
                    double* at = acc.data() + t0;
                    store(zt, r0); store(zt + VW, r1); store(zt + 2 * VW, r2); store(zt + 3 * VW, r3);
                    store(at, load(at) + r0 * r0); store(at + VW, load(at + VW) + r1 * r1);
                    store(at + 2 * VW, load(at + 2 * VW) + r2 * r2); store(at + 3 * VW, load(at + 3 * VW) + r3 * r3);
                }
            }
            const double base = alphas[c] + sumq[c];
            double* in = inner.data() + static_cast<std::size_t>(c) * B;
            for (int t = 0; t < B; ++t) in[t] = base - 0.5 * acc[t];
        }
        // log-sum-exp over components; inner becomes exp(inner - max)
        for (int t = 0; t < B; ++t) { hi[t] = -INFINITY; se[t] = 0.0; }
        for (int c = 0; c < k; ++c) {
            const double* in = inner.data() + static_cast<std::size_t>(c) * B;
            for (int t = 0; t < B; ++t) hi[t] = std::max(hi[t], in[t]);
        }
        for (int c = 0; c < k; ++c) {
            double* in = inner.data() + static_cast<std::size_t>(c) * B;
            for (int t = 0; t < nb; ++t) { in[t] = std::exp(in[t] - hi[t]); se[t] += in[t]; }
        }
        for (int t = 0; t < nb; ++t) slse += std::log(se[t]) + hi[t];
        // reverse sweep: r, w = r z (in place of z), sum_i r, sum_i w, dQ_k -= w (x - mu_k)^T
        for (int t = nb; t < B; ++t) se[t] = 1.0;
        for (int c = 0; c < k; ++c) {
            double* in = inner.data() + static_cast<std::size_t>(c) * B;
            for (int t = 0; t < nb; ++t) in[t] /= se[t];
            for (int t = nb; t < B; ++t) in[t] = 0.0;
            const double* mu = means + static_cast<std::size_t>(c) * d;
            for (int b = 0; b < d; ++b) {
                const double* xr = XT.data() + static_cast<std::size_t>(b) * B;
                double* xc = XcT.data() + static_cast<std::size_t>(b) * B;
                for (int t = 0; t < nb; ++t) xc[t] = xr[t] - mu[b];
                for (int t = nb; t < B; ++t) xc[t] = 0.0;
            }
            double* z = Z.data() + c * zs;
            double* dQ = dQm.data() + c * dd;
            double* swc = sw.data() + static_cast<std::size_t>(c) * d;
            rsum[c] += sum(in, B);
            for (int a = 0; a < d; ++a) {
                double* w = z + static_cast<std::size_t>(a) * B;
                for (int t = 0; t < B; ++t) w[t] *= in[t];
                swc[a] += sum(w, B);
                double out[4];
                for (int b = 0; b <= a; b += 4) {          // rows b..b+3 of XcT exist (d4 rows, zero past d)
                    dot4(w, XcT.data() + static_cast<std::size_t>(b) * B, B, B, out);
                    for (int j = 0; j < 4 && b + j <= a; ++j) dQ[a * d + b + j] -= out[j];
                }
            }
        }
    }

    // log-sum-exp of alphas
    double am = -INFINITY;
    for (int c = 0; c < k; ++c) am = std::max(am, alphas[c]);
    double sa = 0.0;
    for (int c = 0; c < k; ++c) sa += std::exp(alphas[c] - am);
    const double lse_alpha = std::log(sa) + am;

    double prior = 0.0;
    for (int c = 0; c < k; ++c) {
        const double* q = icf + static_cast<std::size_t>(c) * p;
        const double* Q = Qm.data() + c * dd;
        const double* dQ = dQm.data() + c * dd;
        const double* swc = sw.data() + static_cast<std::size_t>(c) * d;
        double* gq = g_icf + static_cast<std::size_t>(c) * p;
        double* gm = g_means + static_cast<std::size_t>(c) * d;
        g_alphas[c] = rsum[c] - n * std::exp(alphas[c] - am) / sa;
        double sq = 0.0;
        int li = d;
        for (int b = 0; b < d; ++b) {
            const double e = Q[b * d + b];
            sq += e * e;
            gq[b] = dQ[b * d + b] * e + rsum[c] - g2 * e * e + m;
            double s = 0.0;                              // (Q^T sw)_b = sum_{a >= b} Q[a][b] sw[a]
            for (int a = b; a < d; ++a) s += Q[a * d + b] * swc[a];
            gm[b] = s;
            for (int a = b + 1; a < d; ++a, ++li) {
                sq += q[li] * q[li];
                gq[li] = dQ[a * d + b] - g2 * q[li];
            }
        }
        prior -= 0.5 * g2 * sq - m * sumq[c];
    }

    const double nn = d + m + 1;
    const double cst = -n * d * 0.5 * std::log(2 * M_PI)
                       + k * (nn * d * std::log(gamma / std::sqrt(2.0)) - log_multigamma(d, 0.5 * nn));
    return cst + slse - n * lse_alpha + prior;
}

}  // extern "C"
