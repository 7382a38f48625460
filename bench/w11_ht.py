"""W11 — hand tracking: skinned-mesh residuals and their Jacobian (GradBench / ADBench "ht").

The residuals of ADBench section 4.3 (GradBench's ht eval, whose C++
reference is ``ht.hpp``). A hand model has 22 bones (a parent index each,
parents before children), each with a 4 × 4 base relative transform and the
inverse of its base absolute transform, V base vertices (homogeneous, (V, 4))
with skinning weights (V, 22) that sum to 1 per vertex, and triangles
(T, 3). The 26 parameters θ are: global rotation (angle-axis, 3), global
translation (3), then per finger (thumb, index, middle, ring, pinky) the
two angles of its first joint and one angle of each of the next two.

1. Pose parameters: a (25, 3) array, row 0 the global rotation, row 1 the
   scale (ones), row 2 the translation, row 3 + b bone b's Euler angles
   (x, z, y order as the spec stores them; finger f's bones 2 + 4f … 4 + 4f
   take its four angles, bones 0, 1 and every fourth finger bone none).
2. Posed relatives: bone b's base relative times ``[[R_b, 0], [0, 1]]``,
   R_b = R_z R_y R_x of its Euler angles.
3. Absolutes: a bone's relative after its parent's absolute (the hierarchy,
   taken one depth level at a time).
4. Linear blend skinning: transform_b = absolute_b · inverse_base_absolute_b;
   vertex v goes to Σ_b w_vb (transform_b · p_v)[:3].
5. Global transform: the angle-axis rotation (Rodrigues; the identity when
   ‖r‖ < 1e-4, as the spec) scaled by the scale row, plus the translation.
6. Residuals, 3 per correspondence i, ``err[3i + j]``:
   simple: ``points[i, j] − vertex[correspondences[i], j]``;
   complicated: the hand point is the barycentric combination
   ``u₀ v_a + u₁ v_b + (1 − u₀ − u₁) v_c`` of the corners of triangle
   ``correspondences[i]``, with (u₀, u₁) = ``us[i]``.

The Jacobian is GradBench's: (3P, 26) for simple; (3P, 28) for complicated,
whose first two columns are the derivatives of each residual with respect to
its own correspondence's u₀ and u₁ (residual i depends on us[i] only, so the
(3P, 2P) block is compressed into 2 columns) and the rest the θ columns.

**The model and the data are synthetic.** ADBench's model files
(bones.txt, vertices.txt, triangles.txt) and hand*.txt data files are not
available here, so `make_model` builds a model of the same structure from a
fixed seed: the spec's 22-bone hierarchy (root, palm, 5 fingers × 4 bones),
random small base rotations, a cylinder of `RINGS` × `SEGMENTS` vertices
around every bone (V = 528, T = 792), each vertex weighted between its bone
and the bone's parent (and a little on a third bone) with weights summing
to 1, and a triangulated surface per cylinder. `make_input` draws a "true"
θ, observes the posed model at P random vertices (simple) or random
barycentric points of random triangles (complicated) with noise, and
perturbs θ for the input, all from ``default_rng(SEED + P)``.
Sizes: P ∈ {100, 400, 1600} correspondences for each variant
(``BENCH_W11_P=100,400``; ``--quick``: P = 20).

The reference is a central finite-difference Jacobian of the same NumPy
residuals with Richardson extrapolation (h = 1e-3 and 5e-4, fourth-order
accurate; the u columns are differenced with all u₀ (or u₁) moved at once,
exact because residual i depends on us[i] only); the "numpy" row is that
reference. The check is ADBench's ρ < 1e-8 on the residuals and on every
Jacobian entry.
"""

from __future__ import annotations

import os

import numpy as np

from .field import autograd_system, jax_system, numpy_system, rho_compare, symgraph_system, torch_system
from .harness import Settings, WorkloadResult, merge_tables, run_case

TITLE = "Hand tracking: skinned-mesh residuals and Jacobian (float64, GradBench ht; synthetic model)"

SEED = 31337
N_BONES = 22
N_THETA = 26
FINGERS = ("thumb", "index", "middle", "ring", "pinky")
RINGS, SEGMENTS = 4, 6
FULL_P = (100, 400, 1600)
QUICK_P = (20,)


# --------------------------------------------------------------------------- the model

def bone_names() -> list[str]:
    """The 22 bones: root, palm, then four bones per finger (the fourth is the fingertip, never posed)."""
    return ["root", "palm"] + [f"{f}{i}" for f in FINGERS for i in range(1, 5)]


def bone_parents() -> np.ndarray:
    """Parent of every bone (−1 for the root); a finger's first bone hangs from the palm."""
    parents = [-1, 0]
    for f in range(len(FINGERS)):
        parents += [1, 2 + 4 * f, 3 + 4 * f, 4 + 4 * f]
    return np.array(parents, dtype=np.intp)


def _rot(rx: float, ry: float, rz: float) -> np.ndarray:
    cx, sx, cy, sy, cz, sz = np.cos(rx), np.sin(rx), np.cos(ry), np.sin(ry), np.cos(rz), np.sin(rz)
    Rx = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    Ry = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    Rz = np.array([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]])
    return Rz @ Ry @ Rx


def make_model(seed: int = SEED) -> dict:
    """A synthetic hand model with the spec's structure (see the module docstring).

    Returns:
        dict with ``parents`` (22,) int, ``base_relatives`` (22, 4, 4),
        ``inverse_base_absolutes`` (22, 4, 4), ``base_positions`` (V, 4)
        homogeneous, ``weights`` (V, 22) (rows sum to 1), ``triangles``
        (T, 3) int, ``is_mirrored`` False, ``bone_names``.
    """
    rng = np.random.default_rng(seed)
    parents = bone_parents()
    rel = np.tile(np.eye(4), (N_BONES, 1, 1))
    length = np.empty(N_BONES)
    radius = np.empty(N_BONES)
    for b in range(N_BONES):
        if b == 0:
            t, length[b], radius[b] = np.zeros(3), 3.0, 1.2
        elif b == 1:
            t, length[b], radius[b] = np.array([0.0, 3.0, 0.0]), 4.0, 1.6
        else:
            f, k = divmod(b - 2, 4)
            if k == 0:                                   # a finger's base on the palm's far edge
                t = np.array([-3.0 + 1.5 * f, 4.0 - (2.5 if f == 0 else 0.0), 0.0])
            else:
                t = np.array([0.0, length[b - 1], 0.0])
            length[b] = 2.0 - 0.3 * k + 0.2 * rng.standard_normal()
            radius[b] = 0.45 - 0.05 * k
        rel[b, :3, :3] = _rot(*rng.uniform(-0.15, 0.15, 3))
        rel[b, :3, 3] = t
    absolutes = np.empty_like(rel)
    for b in range(N_BONES):
        absolutes[b] = rel[b] if parents[b] < 0 else absolutes[parents[b]] @ rel[b]
    inv_abs = np.linalg.inv(absolutes)
    pts, weights, tris = [], [], []
    ang = 2 * np.pi * np.arange(SEGMENTS) / SEGMENTS
    for b in range(N_BONES):
        base = len(pts) and sum(len(p) for p in pts)
        ys = length[b] * (np.arange(RINGS) + 0.5) / RINGS
        local = np.array([[radius[b] * np.cos(a), y, radius[b] * np.sin(a), 1.0] for y in ys for a in ang])
        local[:, :3] += 0.03 * rng.standard_normal((len(local), 3))
        pts.append(local @ absolutes[b].T)
        w = np.zeros((len(local), N_BONES))
        s = np.repeat((np.arange(RINGS) + 0.5) / RINGS, SEGMENTS)          # 0 at the joint, 1 at the far end
        own = 0.5 + 0.5 * s if parents[b] >= 0 else np.ones_like(s)
        w[:, b] = own
        if parents[b] >= 0:
            w[:, parents[b]] = 1.0 - own
        other = rng.integers(0, N_BONES, len(local))
        w[np.arange(len(local)), other] += rng.uniform(0.0, 0.05, len(local))
        weights.append(w / w.sum(axis=1, keepdims=True))
        for r in range(RINGS - 1):
            for q in range(SEGMENTS):
                a, b2 = base + r * SEGMENTS + q, base + r * SEGMENTS + (q + 1) % SEGMENTS
                tris += [(a, b2, a + SEGMENTS), (b2, b2 + SEGMENTS, a + SEGMENTS)]
    return {"bone_names": bone_names(), "parents": parents, "base_relatives": rel,
            "inverse_base_absolutes": inv_abs, "base_positions": np.concatenate(pts),
            "weights": np.concatenate(weights), "triangles": np.array(tris, dtype=np.intp),
            "is_mirrored": False}


def pose_index() -> np.ndarray:
    """(25, 3) map from the pose parameters into ``[θ (26) | 0 | 1]`` (the spec's to_pose_params)."""
    zero, one = N_THETA, N_THETA + 1
    idx = np.full((N_BONES + 3, 3), zero, dtype=np.intp)
    idx[0], idx[1], idx[2] = (0, 1, 2), one, (3, 4, 5)
    i_theta, row = 6, 5
    for _ in FINGERS:
        idx[row, :2] = (i_theta, i_theta + 1)
        idx[row + 1, 0], idx[row + 2, 0] = i_theta + 2, i_theta + 3
        i_theta, row = i_theta + 4, row + 4
    return idx


def _levels(parents: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Bones grouped by depth below the root: [(bones, their parents), ...], root level first."""
    depth = np.zeros(len(parents), dtype=np.intp)
    for b, p in enumerate(parents):
        depth[b] = 0 if p < 0 else depth[p] + 1
    return [(np.flatnonzero(depth == d), parents[depth == d]) for d in range(depth.max() + 1)]


# --------------------------------------------------------------------------- the objective

def _stack_mat(rows, xp):
    """A (..., 3, 3) array from nine (...,) arrays in row-major order."""
    return xp.stack([xp.stack(rows[0:3], axis=-1), xp.stack(rows[3:6], axis=-1), xp.stack(rows[6:9], axis=-1)],
                    axis=-2)


def _euler_rotations(E, xp):
    """R_z R_y R_x for every row of E (bones, 3) = (x, z, y) angles (the spec's xzy order)."""
    tx, tz, ty = E[:, 0], E[:, 1], E[:, 2]
    cx, sx, cy, sy, cz, sz = xp.cos(tx), xp.sin(tx), xp.cos(ty), xp.sin(ty), xp.cos(tz), xp.sin(tz)
    # R_z R_y R_x multiplied out
    return _stack_mat([cz * cy, cz * sy * sx - sz * cx, cz * sy * cx + sz * sx,
                       sz * cy, sz * sy * sx + cz * cx, sz * sy * cx - cz * sx,
                       -sy, cy * sx, cy * cx], xp)


def _angle_axis(r, xp):
    """Rodrigues' rotation matrix of the angle-axis vector r (3,); the identity when ‖r‖ < 1e-4 (the spec)."""
    sq = xp.sum(r * r)
    small = sq < 1e-8
    n = xp.sqrt(xp.where(small, 1.0, sq))
    x, y, z = r[0] / n, r[1] / n, r[2] / n
    c, s = xp.cos(n), xp.sin(n)
    R = _stack_mat([x * x + (1 - x * x) * c, x * y * (1 - c) - z * s, x * z * (1 - c) + y * s,
                    x * y * (1 - c) + z * s, y * y + (1 - y * y) * c, y * z * (1 - c) - x * s,
                    x * z * (1 - c) - y * s, z * y * (1 - c) + x * s, z * z + (1 - z * z) * c], xp)
    return xp.where(small, xp.eye(3), R)


def skinned_vertices(theta, model: dict, xp=np):
    """The posed, skinned and globally transformed vertices (V, 3) of the model for parameters θ (26,)."""
    ext = xp.concatenate([theta, xp.zeros(1), xp.ones(1)])
    pose = ext[pose_index()]                                          # (25, 3)
    R = _euler_rotations(pose[3:], xp)                                # (22, 3, 3)
    base = model["base_relatives"]
    rel = xp.concatenate([xp.matmul(base[:, :, :3], R), base[:, :, 3:]], axis=2)
    # absolutes, one depth level at a time; `order` maps a bone to its row in the concatenation
    done, order = [], np.empty(N_BONES, dtype=np.intp)
    count = 0
    for bones, parents in _levels(model["parents"]):
        if parents[0] < 0:
            level = rel[bones]
        else:
            prev = xp.concatenate(done, axis=0) if len(done) > 1 else done[0]
            level = xp.matmul(prev[order[parents]], rel[bones])
        done.append(level)
        order[bones] = count + np.arange(len(bones))
        count += len(bones)
    absolutes = xp.concatenate(done, axis=0)[order]
    transforms = xp.matmul(absolutes, model["inverse_base_absolutes"])[:, :3, :]   # (22, 3, 4)
    blended = xp.reshape(xp.matmul(model["weights"], xp.reshape(transforms, (N_BONES, 12))), (-1, 3, 4))
    verts = xp.sum(blended * model["base_positions"][:, None, :], axis=2)          # (V, 3)
    if model["is_mirrored"]:
        verts = verts * np.array([-1.0, 1.0, 1.0])
    G = _angle_axis(pose[0], xp) * pose[1][None, :]
    return xp.matmul(verts, xp.swapaxes(G, 0, 1)) + pose[2]


def residuals_simple(theta, model: dict, correspondences, points, xp=np):
    """err (3P,): ``points[i, j] − vertex[correspondences[i], j]`` at 3i + j."""
    v = skinned_vertices(theta, model, xp)
    return xp.reshape(points - v[correspondences], (-1,))


def residuals_complicated(theta, us, model: dict, corners, points, xp=np):
    """err (3P,) with the hand point a barycentric combination of the corners of correspondence i's triangle.

    Args:
        corners: (P, 3) int, ``model["triangles"][correspondences]``: the
            integer lookup is done once when the input is read (a NumPy
            array indexed by a traced array cannot trace, in symgraph as in
            JAX, and it is not differentiated).
    """
    v = skinned_vertices(theta, model, xp)
    tri = corners
    u0, u1 = us[:, 0:1], us[:, 1:2]
    hand = u0 * v[tri[:, 0]] + u1 * v[tri[:, 1]] + (1.0 - u0 - u1) * v[tri[:, 2]]
    return xp.reshape(points - hand, (-1,))


# --------------------------------------------------------------------------- inputs

def make_input(p: int, complicated: bool, model: dict | None = None):
    """``(theta (26,), us (P, 2) or None, correspondences (P,) int, points (P, 3))`` for P correspondences.

    A "true" θ poses the model; the points are the posed vertices
    (complicated: barycentric points of triangles) plus noise 0.05; the
    returned θ is the true one perturbed by 0.05 (what a tracker's current
    estimate looks like). Seeded with ``default_rng(SEED + p)``.
    """
    model = make_model() if model is None else model
    rng = np.random.default_rng(SEED + p + (1 if complicated else 0))
    true = np.concatenate([rng.uniform(-0.6, 0.6, 3), rng.uniform(-5, 5, 3), rng.uniform(-0.5, 0.5, 20)])
    v = skinned_vertices(true, model)
    if complicated:
        corr = rng.integers(0, len(model["triangles"]), p)
        a = rng.uniform(0, 1, (p, 2))
        us = np.where(a.sum(axis=1, keepdims=True) > 1, 1 - a, a)          # u0 + u1 <= 1
        tri = model["triangles"][corr]
        pts = (us[:, :1] * v[tri[:, 0]] + us[:, 1:] * v[tri[:, 1]] + (1 - us.sum(axis=1, keepdims=True))
               * v[tri[:, 2]])
    else:
        corr, us = rng.integers(0, len(model["base_positions"]), p), None
        pts = v[corr]
    pts = pts + 0.05 * rng.standard_normal(pts.shape)
    theta = true + 0.05 * rng.standard_normal(N_THETA)
    return theta, us, corr.astype(np.intp), pts


def corners(model: dict, correspondences: np.ndarray) -> np.ndarray:
    """(P, 3) vertex indices of every correspondence's triangle (the complicated variant's integer input)."""
    return np.ascontiguousarray(model["triangles"][correspondences])


# --------------------------------------------------------------------------- the reference

H1, H2 = 1e-3, 5e-4


def _richardson(f, x, e):
    """Fourth-order central difference of f along direction e: (4 D(h/2) − D(h)) / 3."""
    d1 = (f(x + H1 * e) - f(x - H1 * e)) / (2 * H1)
    d2 = (f(x + H2 * e) - f(x - H2 * e)) / (2 * H2)
    return (4 * d2 - d1) / 3


def fd_simple(model):
    """The reference for simple: ``(err (3P,), J (3P, 26))`` by finite differences."""
    def run(theta, corr, points):
        f = lambda t: residuals_simple(t, model, corr, points)  # noqa: E731
        J = np.stack([_richardson(f, theta, e) for e in np.eye(N_THETA)], axis=1)
        return f(theta), J
    return run


def fd_complicated(model):
    """The reference for complicated: ``(err (3P,), J (3P, 28))``, u₀/u₁ columns first (compressed)."""
    def run(theta, us, corr, points):
        ft = lambda t: residuals_complicated(t, us, model, corr, points)  # noqa: E731
        fu = lambda u: residuals_complicated(theta, u, model, corr, points)  # noqa: E731
        cols = [_richardson(fu, us, np.broadcast_to(e, us.shape)) for e in np.eye(2)]
        cols += [_richardson(ft, theta, e) for e in np.eye(N_THETA)]
        return ft(theta), np.stack(cols, axis=1)
    return run


# --------------------------------------------------------------------------- systems

def _u_seeds(p: int) -> np.ndarray:
    """(2, P, 2): the tangents that move every u₀ (then every u₁) at once."""
    s = np.zeros((2, p, 2))
    s[0, :, 0] = 1.0
    s[1, :, 1] = 1.0
    return s


def _sg_simple(model):
    def make(sg):
        def f(theta, corr, points):
            r = lambda t: residuals_simple(t, model, corr, points)  # noqa: E731
            return r(theta), sg.jacobian(r)(theta)
        return f
    return make


def _sg_complicated(model):
    def make(sg):
        def f(theta, us, corr, points):
            r = lambda t, u: residuals_complicated(t, u, model, corr, points)  # noqa: E731
            ju = sg.vmap(lambda s: sg.jvp(lambda u: r(theta, u), (us,), (s,))[1])(_u_seeds(us.shape[0]))
            return r(theta, us), np.concatenate([ju.T, sg.jacobian(r)(theta, us)], axis=1)
        return f
    return make


def _jax_simple(model):
    def make(jax, jnp):
        def f(theta, corr, points):
            r = lambda t: residuals_simple(t, model, corr, points, jnp)  # noqa: E731
            return r(theta), jax.jacfwd(r)(theta)
        return f
    return make


def _jax_complicated(model):
    def make(jax, jnp):
        def f(theta, us, corr, points):
            r = lambda t, u: residuals_complicated(t, u, model, corr, points, jnp)  # noqa: E731
            seeds = _u_seeds(us.shape[0])
            ju = jax.vmap(lambda s: jax.jvp(lambda u: r(theta, u), (us,), (s,))[1])(seeds)
            return r(theta, us), jnp.concatenate([ju.T, jax.jacfwd(r)(theta, us)], axis=1)
        return f
    return make


class _TorchNS:
    """The NumPy functions the residuals take from their namespace, in torch (float64 constants)."""

    def __init__(self, torch):
        self.t = torch
        for name in ("sin", "cos", "sqrt", "sum", "where", "matmul", "stack", "reshape", "swapaxes"):
            setattr(self, name, getattr(torch, name))

    def concatenate(self, xs, axis=0):
        return self.t.cat([self._t(x) for x in xs], dim=axis)

    def zeros(self, n):
        return self.t.zeros(n, dtype=self.t.float64)

    def ones(self, n):
        return self.t.ones(n, dtype=self.t.float64)

    def eye(self, n):
        return self.t.eye(n, dtype=self.t.float64)

    def _t(self, x):
        return x if isinstance(x, self.t.Tensor) else self.t.from_numpy(np.asarray(x))


def _torch_model(torch, model):
    out = dict(model)
    for k in ("base_relatives", "inverse_base_absolutes", "base_positions", "weights"):
        out[k] = torch.from_numpy(model[k])
    return out


def _torch_simple(model):
    def make(torch):
        from torch.func import jacfwd
        ns, tm = _TorchNS(torch), _torch_model(torch, model)

        def f(theta, corr, points):
            r = lambda t: residuals_simple(t, tm, corr, points, ns)  # noqa: E731
            return r(theta), jacfwd(r)(theta)
        return f
    return make


def _torch_complicated(model):
    def make(torch):
        from torch.func import jacfwd, jvp, vmap
        ns, tm = _TorchNS(torch), _torch_model(torch, model)

        def f(theta, us, corr, points):
            r = lambda t, u: residuals_complicated(t, u, tm, corr, points, ns)  # noqa: E731
            seeds = torch.from_numpy(_u_seeds(us.shape[0]))
            ju = vmap(lambda s: jvp(lambda u: r(theta, u), (us,), (s,))[1])(seeds)
            return r(theta, us), torch.cat([ju.T, jacfwd(r)(theta, us)], dim=1)
        return f
    return make


def _autograd_simple(model):
    def make(ag, anp):
        def f(theta, corr, points):
            r = lambda t: residuals_simple(t, model, corr, points, anp)  # noqa: E731
            jvp = ag.make_jvp(r)(theta)
            cols = [jvp(e)[1] for e in np.eye(N_THETA)]
            return r(theta), np.stack(cols, axis=1)
        return f
    return make


def _autograd_complicated(model):
    def make(ag, anp):
        def f(theta, us, corr, points):
            jt = ag.make_jvp(lambda t: residuals_complicated(t, us, model, corr, points, anp))(theta)
            ju = ag.make_jvp(lambda u: residuals_complicated(theta, u, model, corr, points, anp))(us)
            cols = [ju(s)[1] for s in _u_seeds(us.shape[0])] + [jt(e)[1] for e in np.eye(N_THETA)]
            return residuals_complicated(theta, us, model, corr, points), np.stack(cols, axis=1)
        return f
    return make


def systems(model, complicated: bool) -> list:
    """W11's systems in table order for one variant."""
    if complicated:
        return [
            symgraph_system(_sg_complicated(model),
                            note="sg.jacobian (forward, 26 columns) for theta and sg.vmap(sg.jvp) of the two "
                                 "u seeds, one sg.compile"),
            numpy_system(fd_complicated(model), note="Richardson central differences (the reference)"),
            jax_system(_jax_complicated(model), note="jax.jit of jax.jacfwd and jax.vmap(jax.jvp); "
                                                     "block_until_ready"),
            autograd_system(_autograd_complicated(model), note="autograd.make_jvp, one call per column (28)"),
            torch_system(_torch_complicated(model), note="torch.func.jacfwd and vmap(jvp), eager"),
        ]
    return [
        symgraph_system(_sg_simple(model), note="sg.compile of sg.jacobian (forward mode, 26 columns)"),
        numpy_system(fd_simple(model), note="Richardson central differences (the reference)"),
        jax_system(_jax_simple(model), note="jax.jit(jax.jacfwd); block_until_ready"),
        autograd_system(_autograd_simple(model), note="autograd.make_jvp, one call per column (26)"),
        torch_system(_torch_simple(model), note="torch.func.jacfwd, eager"),
    ]


def cases(quick: bool) -> list[int]:
    """P of the run; ``BENCH_W11_P`` (comma-separated) limits a full run."""
    if quick:
        return list(QUICK_P)
    if os.environ.get("BENCH_W11_P"):
        return [int(v) for v in os.environ["BENCH_W11_P"].split(",")]
    return list(FULL_P)


def run(settings: Settings) -> WorkloadResult:
    """Run simple and complicated at every P; one merged table per variant."""
    model = make_model()
    tables = []
    for complicated in (False, True):
        parts = []
        for p in cases(settings.quick):
            theta, us, corr, pts = make_input(p, complicated, model)
            inputs = (theta, us, corners(model, corr), pts) if complicated else (theta, corr, pts)
            ref = (fd_complicated if complicated else fd_simple)(model)
            parts.append(run_case(settings, f"{'complicated' if complicated else 'simple'} P={p}", inputs,
                                  lambda ref=ref, inputs=inputs: ref(*inputs), systems(model, complicated),
                                  check=rho_compare, extra=lambda row, step, p=p: {"P": p}))
        name = ("complicated: residuals and Jacobian (3P x (2 + 26))" if complicated
                else "simple: residuals and Jacobian (3P x 26)")
        tables.append(merge_tables(name, parts, key="P",
                                   notes=["check: rho < 1e-8 against the finite-difference reference",
                                          f"synthetic model: {N_BONES} bones, {len(model['base_positions'])} "
                                          f"vertices, {len(model['triangles'])} triangles"]))
    return WorkloadResult("W11", TITLE, tables)
