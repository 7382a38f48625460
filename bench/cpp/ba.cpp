// W9 peer: bundle-adjustment reprojection residuals and their per-observation Jacobian blocks,
// hand-written C++ with a hand-derived Jacobian (chain rule, no dual numbers).
//
// The residual of bench/w9_ba.py (GradBench's ba, ADBench section 4.2) for observation i of
// camera c (r: Rodrigues rotation (3), C: centre (3), f, x0 (2), kappa (2)), point X (3),
// weight w and feature m (2):
//
//   Xc = X - C,  theta = |r|,  u = r / theta,  a = u . Xc
//   Y  = Xc cos(theta) + (u x Xc) sin(theta) + u a (1 - cos(theta))     (theta > 0)
//   Y  = Xc + r x Xc                                                    (theta = 0)
//   p  = Y[:2] / Y[2],  rsq = |p|^2,  L = 1 + k1 rsq + k2 rsq^2,  p' = L p
//   e  = w (f p' + x0 - m)
//
// Derivatives (columns: r 0-2, C 3-5, f 6, x0 7-8, kappa 9-10, X 11-13, w 14):
//
//   dY/dXc = R = c I + s [u]x + (1 - c) u u^T              (theta = 0: I + [r]x)
//   dY/dr  = -s Xc u^T - s [Xc]x P / theta + c (u x Xc) u^T
//            + (1 - c) (a P + u (P Xc)^T) / theta + s a u u^T,
//            with P = I - u u^T = theta du/dr; theta = 0: -[Xc]x
//   dp/dY  = [[1/Y2, 0, -p0/Y2], [0, 1/Y2, -p1/Y2]]
//   dp'/dp = L I + 2 (k1 + 2 k2 rsq) p p^T,   dp'/dk1 = rsq p,  dp'/dk2 = rsq^2 p
//   de/dY  = w f dp'/dp dp/dY;  de/dr = de/dY dY/dr;  de/dX = de/dY R = -de/dC
//   de/df  = w p';  de/dx0 = w I;  de/dw = f p' + x0 - m
//
// One observation at a time (the blocks are independent); double precision, one thread.

#include <cmath>
#include <cstdint>

namespace {

inline void cross(const double* a, const double* b, double* out) {
    out[0] = a[1] * b[2] - a[2] * b[1];
    out[1] = a[2] * b[0] - a[0] * b[2];
    out[2] = a[0] * b[1] - a[1] * b[0];
}

}  // namespace

extern "C" {

// cams (n, 11), X (m, 3), w (p,), feats (p, 2), obs (p, 2) int64 (camera, point) -- all
// C-contiguous. Outputs: err (p, 2), werr (p,), blocks (p, 2, 15), dw (p,).
void ba_residuals_jacobian(int n, int m, int p, const double* cams, const double* X, const double* w,
                           const double* feats, const std::int64_t* obs, double* err, double* werr,
                           double* blocks, double* dw) {
    (void)n; (void)m;
    for (int i = 0; i < p; ++i) {
        const double* cam = cams + 11 * obs[2 * i];
        const double* pt = X + 3 * obs[2 * i + 1];
        const double* r = cam;
        const double f = cam[6], k1 = cam[9], k2 = cam[10];
        const double wi = w[i];
        double Xc[3] = {pt[0] - cam[3], pt[1] - cam[4], pt[2] - cam[5]};
        double Y[3], R[3][3], dYdr[3][3];
        const double sq = r[0] * r[0] + r[1] * r[1] + r[2] * r[2];
        if (sq == 0.0) {
            double rx[3];
            cross(r, Xc, rx);
            for (int j = 0; j < 3; ++j) Y[j] = Xc[j] + rx[j];
            // R = I + [r]x ; dY/dr = -[Xc]x
            R[0][0] = 1;     R[0][1] = -r[2]; R[0][2] = r[1];
            R[1][0] = r[2];  R[1][1] = 1;     R[1][2] = -r[0];
            R[2][0] = -r[1]; R[2][1] = r[0];  R[2][2] = 1;
            dYdr[0][0] = 0;      dYdr[0][1] = Xc[2];  dYdr[0][2] = -Xc[1];
            dYdr[1][0] = -Xc[2]; dYdr[1][1] = 0;      dYdr[1][2] = Xc[0];
            dYdr[2][0] = Xc[1];  dYdr[2][1] = -Xc[0]; dYdr[2][2] = 0;
        } else {
            const double th = std::sqrt(sq), c = std::cos(th), s = std::sin(th);
            const double u[3] = {r[0] / th, r[1] / th, r[2] / th};
            const double a = u[0] * Xc[0] + u[1] * Xc[1] + u[2] * Xc[2];
            double uxX[3];
            cross(u, Xc, uxX);
            for (int j = 0; j < 3; ++j) Y[j] = Xc[j] * c + uxX[j] * s + u[j] * a * (1.0 - c);
            const double ux[3][3] = {{0, -u[2], u[1]}, {u[2], 0, -u[0]}, {-u[1], u[0], 0}};
            const double Xx[3][3] = {{0, -Xc[2], Xc[1]}, {Xc[2], 0, -Xc[0]}, {-Xc[1], Xc[0], 0}};
            double P[3][3];
            for (int j = 0; j < 3; ++j)
                for (int l = 0; l < 3; ++l) {
                    P[j][l] = (j == l ? 1.0 : 0.0) - u[j] * u[l];
                    R[j][l] = (j == l ? c : 0.0) + s * ux[j][l] + (1.0 - c) * u[j] * u[l];
                }
            double PX[3];                                   // P Xc = Xc - a u
            for (int j = 0; j < 3; ++j) PX[j] = Xc[j] - a * u[j];
            for (int j = 0; j < 3; ++j)
                for (int l = 0; l < 3; ++l) {
                    double XxP = 0.0;
                    for (int q = 0; q < 3; ++q) XxP += Xx[j][q] * P[q][l];
                    dYdr[j][l] = -s * Xc[j] * u[l] - s * XxP / th + c * uxX[j] * u[l]
                                 + (1.0 - c) * (a * P[j][l] + u[j] * PX[l]) / th + s * a * u[j] * u[l];
                }
        }
        const double iz = 1.0 / Y[2];
        const double p0 = Y[0] * iz, p1 = Y[1] * iz;
        const double rsq = p0 * p0 + p1 * p1;
        const double L = 1.0 + k1 * rsq + k2 * rsq * rsq;
        const double dL = 2.0 * (k1 + 2.0 * k2 * rsq);
        const double d0 = L * p0, d1 = L * p1;            // p'
        const double* mi = feats + 2 * i;
        const double e0 = f * d0 + cam[7] - mi[0], e1 = f * d1 + cam[8] - mi[1];
        err[2 * i] = wi * e0;
        err[2 * i + 1] = wi * e1;
        werr[i] = 1.0 - wi * wi;
        dw[i] = -2.0 * wi;
        // de/dp = w f dp'/dp (2x2), then de/dY = de/dp dp/dY (2x3)
        const double wf = wi * f;
        const double A00 = wf * (L + dL * p0 * p0), A01 = wf * dL * p0 * p1, A11 = wf * (L + dL * p1 * p1);
        const double A10 = A01;
        double JY[2][3];
        JY[0][0] = A00 * iz; JY[0][1] = A01 * iz; JY[0][2] = -(A00 * p0 + A01 * p1) * iz;
        JY[1][0] = A10 * iz; JY[1][1] = A11 * iz; JY[1][2] = -(A10 * p0 + A11 * p1) * iz;
        double* B = blocks + 30 * static_cast<std::int64_t>(i);
        for (int row = 0; row < 2; ++row) {
            double* b = B + 15 * row;
            for (int l = 0; l < 3; ++l) {
                double gr = 0.0, gx = 0.0;
                for (int j = 0; j < 3; ++j) { gr += JY[row][j] * dYdr[j][l]; gx += JY[row][j] * R[j][l]; }
                b[l] = gr;
                b[3 + l] = -gx;
                b[11 + l] = gx;
            }
            const double pr = row == 0 ? d0 : d1, pp = row == 0 ? p0 : p1;
            b[6] = wi * pr;
            b[7] = row == 0 ? wi : 0.0;
            b[8] = row == 0 ? 0.0 : wi;
            b[9] = wf * rsq * pp;
            b[10] = wf * rsq * rsq * pp;
            b[14] = row == 0 ? e0 : e1;
        }
    }
}

}  // extern "C"
