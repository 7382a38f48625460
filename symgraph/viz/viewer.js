/* symgraph graph viewer: draws the embedded graph (JSON in #sg-data) on a canvas.
   Dependency-free; inlined into each page by symgraph/viz/html.py. The layout comes with the data.
   Items: a node (index < N) or a collapsed region (N + region index). */
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("sg-data").textContent);
  var N = D.n, R = D.regions.length, W = D.node_w, H = D.node_h, BW = W + 24, BH = H + 12;
  var canvas = document.getElementById("sg-canvas"), ctx = canvas.getContext("2d");
  var $ = function (id) { return document.getElementById(id); };
  var ARGS = D.args || {}, PORT = D.port || {}, NG = D.n_graph === undefined ? N : D.n_graph, i, j;
  // the real inputs of a node (for a loop node and a loop body's inputs, D.ins holds the drawn edges)
  function argsOf(n) { var a = ARGS[n]; return a !== undefined ? a : D.ins[n]; }
  var users = [], dusers = [];  // readers (real) and drawn readers
  for (i = 0; i < N; i++) { users.push([]); dusers.push([]); }
  for (i = 0; i < N; i++) {
    var ai = argsOf(i);
    for (j = 0; j < ai.length; j++) users[ai[j]].push(i);
    for (j = 0; j < D.ins[i].length; j++) dusers[D.ins[i][j]].push(i);
  }
  var isOut = new Uint8Array(N);
  D.outputs.forEach(function (o) { isOut[o] = 1; });
  // regions: a group (nodes of one role and line, or a kernel) or a loop (its output nodes and its body, with
  // the groups and loops inside it); D.region is a node's innermost region, regions[r].parent the enclosing one
  var rpar = new Int32Array(R), isLoop = new Uint8Array(R), HAS_LOOPS = false;
  for (i = 0; i < R; i++) {
    rpar[i] = D.regions[i].parent === undefined ? -1 : D.regions[i].parent;
    if (D.regions[i].loop) { isLoop[i] = 1; HAS_LOOPS = true; }
  }
  var rmem = [], rcx = new Float64Array(R), rcy = new Float64Array(R), rw = new Float64Array(R), rh = new Float64Array(R);
  for (i = 0; i < R; i++) rmem.push([]);
  for (i = 0; i < N; i++) if (D.region[i] >= 0) rmem[D.region[i]].push(i);
  for (i = 0; i < R; i++) {
    var x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    rmem[i].forEach(function (n) { x0 = Math.min(x0, D.x[n]); x1 = Math.max(x1, D.x[n]); y0 = Math.min(y0, D.y[n]); y1 = Math.max(y1, D.y[n]); });
    rcx[i] = (x0 + x1) / 2; rcy[i] = (y0 + y1) / 2; rw[i] = x1 - x0 + W + 16; rh[i] = y1 - y0 + H + 16;
  }
  var collapsed = new Uint8Array(R);
  if (D.start_collapsed) collapsed.fill(1);
  for (i = 0; i < R; i++) if (isLoop[i]) collapsed[i] = 1;  // loop bodies open on demand
  // units: a node (< N) or a region (N + r); parentU: the region a unit sits in (N + r), -1 for the graph itself
  function parentU(u) { var r = u < N ? D.region[u] : rpar[u - N]; return r >= 0 ? N + r : -1; }
  var depthU = new Int32Array(N + R).fill(-1);
  function depth(u) {
    if (u < 0) return -1;
    if (depthU[u] < 0) depthU[u] = depth(parentU(u)) + 1;
    return depthU[u];
  }
  // the containers laid out as blocks (the graph: slot 0, each loop: 1 + r), their units and edges between them
  function slot(c) { return c < 0 ? 0 : c - N + 1; }
  var kids = [], cedges = [], first = new Float64Array(R).fill(Infinity);
  for (i = 0; i <= R; i++) { kids.push([]); cedges.push([]); }
  for (i = 0; i < N; i++) for (var u0 = parentU(i); u0 >= 0; u0 = parentU(u0)) { if (first[u0 - N] <= i) break; first[u0 - N] = i; }
  var unitFirst = function (u) { return u < N ? u : first[u - N]; };
  for (i = 0; i < N; i++) { var pc = parentU(i); if (pc < 0 || isLoop[pc - N]) kids[slot(pc)].push(i); }
  for (i = 0; i < R; i++) { var pr = parentU(N + i); if (pr < 0 || isLoop[pr - N]) kids[slot(pr)].push(N + i); }
  kids.forEach(function (l) { l.sort(function (a, b) { return unitFirst(a) - unitFirst(b); }); });
  for (i = 0; i < N; i++) for (j = 0; j < D.ins[i].length; j++) {
    var ua = D.ins[i][j], ub = i, da = depth(ua), db = depth(ub);
    while (da > db) { ua = parentU(ua); da--; }
    while (db > da) { ub = parentU(ub); db--; }
    if (ua === ub) continue;
    while (parentU(ua) !== parentU(ub)) { ua = parentU(ua); ub = parentU(ub); }
    var cu = parentU(ua);
    if (cu >= 0 && !isLoop[cu - N]) continue;  // inside a group: its block keeps the Python layout
    cedges[slot(cu)].push(ua, ub);
  }
  // drawn positions: nodes (px, py), region boxes and frames (rx, ry; bw x bh); see layout()
  var unitMode = false, px = new Float64Array(N), py = new Float64Array(N), rx = new Float64Array(R), ry = new Float64Array(R);
  var bw = new Float64Array(R), bh = new Float64Array(R), ox = new Float64Array(N + R), oy = new Float64Array(N + R);
  var HEAD = 26, PAD = 14;  // a loop frame: its title bar and margin

  /* With no loop and no region collapsed, the positions are the Python layout's. Otherwise each container
     (the graph, then every expanded loop inside it) lays out its units in layers again: free nodes, regions
     (a collapsed region is one box, an expanded group a block of its members at their Python offsets, an
     expanded loop a block laid out the same way, recursively); longest path over unit edges that go
     forward in the numbering, then barycenter sweeps, as symgraph/viz/layout.py does for nodes. */
  function layout() {
    var n, r, q, any = HAS_LOOPS;
    for (r = 0; r < R && !any; r++) if (collapsed[r]) any = true;
    unitMode = any;
    for (r = 0; r < R; r++) { bw[r] = rw[r]; bh[r] = rh[r]; }
    if (!any) {
      for (n = 0; n < N; n++) { px[n] = D.x[n]; py[n] = D.y[n]; }
      for (r = 0; r < R; r++) { rx[r] = rcx[r]; ry[r] = rcy[r]; }
      return;
    }
    block(-1);
    place(-1, 0, 0);
  }

  function uw(u) { return u < N ? W : (collapsed[u - N] ? BW : bw[u - N]); }
  function uh(u) { return u < N ? H : (collapsed[u - N] ? BH : bh[u - N]); }

  function block(c) {  // lay out the units of container c around (0, 0): ox, oy; returns [width, height]
    var units = kids[slot(c)], U = units.length, q, k, L = 0, rank = new Map();
    if (!U) return [W, H];
    units.forEach(function (u, z) {
      rank.set(u, z);
      if (u >= N && !collapsed[u - N] && isLoop[u - N]) {
        var wh = block(u); bw[u - N] = wh[0] + 2 * PAD; bh[u - N] = wh[1] + 2 * PAD + HEAD;
      }
    });
    var uin = [], uout = [], seen = new Set(), M = N + R, ce = cedges[slot(c)];
    for (k = 0; k < U; k++) { uin.push([]); uout.push([]); }
    for (q = 0; q < ce.length; q += 2) {
      var a = rank.get(ce[q]), b = rank.get(ce[q + 1]);
      if (a === undefined || b === undefined || a >= b || seen.has(a * M + b)) continue;
      seen.add(a * M + b); uin[b].push(a); uout[a].push(b);
    }
    var lay = new Int32Array(U);
    for (k = 0; k < U; k++) for (q = 0; q < uin[k].length; q++) lay[k] = Math.max(lay[k], lay[uin[k][q]] + 1);
    for (k = U - 1; k >= 0; k--) if (!uin[k].length && uout[k].length) {  // sources sit just above their first reader
      var lo = Infinity;
      for (q = 0; q < uout[k].length; q++) lo = Math.min(lo, lay[uout[k][q]] - 1);
      if (lo > lay[k]) lay[k] = lo;
    }
    for (k = 0; k < U; k++) L = Math.max(L, lay[k] + 1);
    var rows = [], rowH = new Float64Array(L), ux = new Float64Array(U), uy = new Float64Array(U);
    for (k = 0; k < L; k++) rows.push([]);
    for (k = 0; k < U; k++) {
      rows[lay[k]].push(k); rowH[lay[k]] = Math.max(rowH[lay[k]], uh(units[k]));
      ux[k] = units[k] < N ? D.x[units[k]] : rcx[units[k] - N];
    }
    var yy = 0;
    for (k = 0; k < L; k++) {
      if (k) yy += rowH[k - 1] / 2 + 42 + rowH[k] / 2;
      rows[k].forEach(function (t) { uy[t] = yy; });
    }
    function put(row, nb) {
      var want = new Map();
      row.forEach(function (t) {
        var l = nb[t];
        if (l.length) { var sx = 0; for (var z = 0; z < l.length; z++) sx += ux[l[z]]; want.set(t, sx / l.length); }
        else want.set(t, ux[t]);
      });
      row.sort(function (a, b) { return want.get(a) - want.get(b); });
      var prev = null, pos = [], shift = 0;
      row.forEach(function (t) {
        var w = want.get(t), p = prev === null ? w : Math.max(w, pos[pos.length - 1] + (uw(units[prev]) + uw(units[t])) / 2 + 20);
        pos.push(p); prev = t; shift += w - p;
      });
      shift /= row.length || 1;
      row.forEach(function (t, z) { ux[t] = pos[z] + shift; });
    }
    for (var sweep = 0; sweep < 2; sweep++) {
      for (k = 1; k < L; k++) put(rows[k], uin);
      for (k = L - 2; k >= 0; k--) put(rows[k], uout);
    }
    for (k = 1; k < L; k++) put(rows[k], uin);
    var x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    for (k = 0; k < U; k++) {
      var hw = uw(units[k]) / 2, hh = uh(units[k]) / 2;
      x0 = Math.min(x0, ux[k] - hw); x1 = Math.max(x1, ux[k] + hw); y0 = Math.min(y0, uy[k] - hh); y1 = Math.max(y1, uy[k] + hh);
    }
    for (k = 0; k < U; k++) { ox[units[k]] = ux[k] - (x0 + x1) / 2; oy[units[k]] = uy[k] - (y0 + y1) / 2; }
    return [x1 - x0, y1 - y0];
  }

  function place(c, cx, cy) {  // absolute positions of container c's units, its centre at (cx, cy)
    kids[slot(c)].forEach(function (u) {
      var ax = cx + ox[u], ay = cy + oy[u];
      if (u < N) { px[u] = ax; py[u] = ay; return; }
      var r = u - N;
      rx[r] = ax; ry[r] = ay;
      if (collapsed[r]) return;
      if (isLoop[r]) { place(u, ax, ay + HEAD / 2); return; }
      for (var q = 0; q < rmem[r].length; q++) { var n = rmem[r][q]; px[n] = ax + D.x[n] - rcx[r]; py[n] = ay + D.y[n] - rcy[r]; }
    });
  }

  var view = { s: 1, tx: 0, ty: 0 }, dpr = window.devicePixelRatio || 1;
  var items = [], edges = [], selected = -1, matches = [], matchAt = -1, hiIn = null, hiOut = null;

  // the item that shows a node or region: the box of its outermost collapsed region, else itself (repOf: -1)
  var repR = new Int32Array(R);
  function repOf(r) {
    var v = -1;
    for (; r >= 0; r = rpar[r]) if (collapsed[r]) v = N + r;
    return v;
  }
  function itemOf(n) { var r = D.region[n]; if (r < 0) return n; var v = repR[r]; return v >= 0 ? v : n; }
  function ix(k) { return k < N ? px[k] : rx[k - N]; }
  function iy(k) { return k < N ? py[k] : ry[k - N]; }
  function iw(k) { return k < N ? W : BW; }
  function ih(k) { return k < N ? H : BH; }
  function roleOf(k) { return D.roles[k < N ? D.role[k] : D.regions[k - N].role]; }
  function nid(n) { return "%" + D.ids[n]; }
  function opLabel(n) { var a = D.attrs[n]; return D.ops[D.op[n]] + (a ? "[" + a + "]" : ""); }
  function typeStr(n) { return D.dtypes[D.dtype[n]] + "[" + D.shape[n].join(",") + "]"; }

  function rebuild() {
    for (var r0 = 0; r0 < R; r0++) repR[r0] = repOf(r0);
    layout();
    var seen = new Uint8Array(N + R), keys = new Set(), M = N + R;
    items = []; edges = [];
    for (var n = 0; n < N; n++) {
      var a = itemOf(n);
      if (!seen[a]) { seen[a] = 1; items.push(a); }
      var ins = D.ins[n];
      for (var q = 0; q < ins.length; q++) {
        var b = itemOf(ins[q]);
        if (b === a) continue;
        var key = b * M + a;
        if (!keys.has(key)) { keys.add(key); edges.push(b, a); }
      }
    }
    var nc = 0, nd = 0;
    for (var r = 0; r < R; r++) nc += collapsed[r];
    for (var z = 0; z < items.length; z++) nd += items[z] < N ? 1 : 0;
    var c = $("sg-count");
    c.textContent = NG + " nodes" + (N > NG ? " (+" + (N - NG) + " in loop bodies)" : "") + ", " + items.length +
      " drawn (" + R + " regions, " + nc + " collapsed)";
    c.dataset.nodes = NG; c.dataset.entries = N; c.dataset.drawn = items.length; c.dataset.drawnNodes = nd;
    c.dataset.collapsed = nc;
    chips();
    draw();
  }

  function resize() {
    var rect = canvas.getBoundingClientRect();
    canvas.width = Math.max(1, Math.round(rect.width * dpr));
    canvas.height = Math.max(1, Math.round(rect.height * dpr));
    draw();
  }

  function fit(list) {
    list = list || items;
    if (!list.length) return;
    var x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    list.forEach(function (k) {
      x0 = Math.min(x0, ix(k) - iw(k) / 2); x1 = Math.max(x1, ix(k) + iw(k) / 2);
      y0 = Math.min(y0, iy(k) - ih(k) / 2); y1 = Math.max(y1, iy(k) + ih(k) / 2);
    });
    var cw = canvas.width / dpr, ch = canvas.height / dpr, pad = 30;
    view.s = Math.min(2, (cw - pad) / (x1 - x0 + 1), (ch - pad) / (y1 - y0 + 1));
    view.tx = cw / 2 - view.s * (x0 + x1) / 2;
    view.ty = ch / 2 - view.s * (y0 + y1) / 2;
    draw();
  }

  function centerOn(k) {
    var cw = canvas.width / dpr, ch = canvas.height / dpr;
    if (view.s < 0.6) view.s = 0.9;
    view.tx = cw / 2 - view.s * ix(k);
    view.ty = ch / 2 - view.s * iy(k);
    draw();
  }

  var pending = false;
  function draw() { if (!pending) { pending = true; requestAnimationFrame(paint); } }

  function rrect(x, y, w, h, rad) {
    ctx.moveTo(x + rad, y); ctx.lineTo(x + w - rad, y); ctx.quadraticCurveTo(x + w, y, x + w, y + rad);
    ctx.lineTo(x + w, y + h - rad); ctx.quadraticCurveTo(x + w, y + h, x + w - rad, y + h);
    ctx.lineTo(x + rad, y + h); ctx.quadraticCurveTo(x, y + h, x, y + h - rad);
    ctx.lineTo(x, y + rad); ctx.quadraticCurveTo(x, y, x + rad, y);
  }

  function fitText(t, w) {
    var max = Math.floor(w / 6.3);
    return t.length <= max ? t : t.slice(0, Math.max(1, max - 1)) + "…";
  }

  function paint() {
    pending = false;
    var s = view.s, cw = canvas.width / dpr, ch = canvas.height / dpr;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, cw, ch);
    ctx.setTransform(dpr * s, 0, 0, dpr * s, dpr * view.tx, dpr * view.ty);
    var vx0 = -view.tx / s, vy0 = -view.ty / s, vx1 = vx0 + cw / s, vy1 = vy0 + ch / s, m = 80;
    function vis(k) {
      var x = ix(k), y = iy(k);
      return x + m > vx0 && x - m < vx1 && y + m > vy0 && y - m < vy1;
    }
    // edges: plain first, then the selection's fan-in (blue) and fan-out (red) on top
    var e, a, b, hi = [];
    ctx.lineWidth = Math.max(0.6, 1 / s) * (s < 0.15 ? 0.6 : 1);
    ctx.strokeStyle = "rgba(90,90,90,0.45)";
    ctx.beginPath();
    for (e = 0; e < edges.length; e += 2) {
      a = edges[e]; b = edges[e + 1];
      var ya = iy(a), yb = iy(b);
      if (Math.max(ya, yb) < vy0 - m || Math.min(ya, yb) > vy1 + m) continue;
      if (Math.max(ix(a), ix(b)) < vx0 - m || Math.min(ix(a), ix(b)) > vx1 + m) continue;
      if ((hiIn && hiIn.has(a) && b === selItem()) || (hiOut && hiOut.has(b) && a === selItem())) { hi.push(a, b); continue; }
      edgePath(a, b);
    }
    ctx.stroke();
    for (e = 0; e < hi.length; e += 2) {
      ctx.beginPath(); ctx.lineWidth = Math.max(2, 2.5 / s);
      ctx.strokeStyle = hi[e + 1] === selItem() ? "#1a5fb4" : "#c01c28";
      edgePath(hi[e], hi[e + 1]); ctx.stroke();
    }
    if (unitMode) {  // expanded regions among collapsed ones: a frame around each block, a loop's with its title
      for (var r2 = 0; r2 < R; r2++) {
        if (collapsed[r2] || repR[r2] >= 0) continue;
        var fw = bw[r2], fh = bh[r2], fx = rx[r2] - fw / 2, fy = ry[r2] - fh / 2;
        if (fx > vx1 || fx + fw < vx0 || fy > vy1 || fy + fh < vy0) continue;
        var fro = D.roles[D.regions[r2].role];
        ctx.beginPath(); rrect(fx, fy, fw, fh, 10); ctx.strokeStyle = fro.border;
        if (isLoop[r2]) {
          ctx.fillStyle = "rgba(129,61,156,0.05)"; ctx.fill();
          ctx.lineWidth = 2 / Math.max(s, 0.3); ctx.strokeStyle = "#813d9c"; ctx.stroke();
          if (s > 0.25) {
            ctx.fillStyle = "#613583"; ctx.font = "bold 12px sans-serif"; ctx.textAlign = "left"; ctx.textBaseline = "middle";
            ctx.fillText("\u27f3 " + fitText(D.regions[r2].label, fw - 20), fx + 8, fy + HEAD / 2 + 2);
          }
        } else {
          ctx.lineWidth = 1 / Math.max(s, 0.2); ctx.setLineDash([6, 4]); ctx.stroke(); ctx.setLineDash([]);
        }
      }
    }
    var text = s > 0.42, matchSet = matches.length ? new Set(matches.map(itemOf)) : null;
    ctx.font = "11px monospace"; ctx.textAlign = "center"; ctx.textBaseline = "middle";
    var inView = 0;  // drawn items whose centre is on the canvas (sg-count's data-in-view)
    for (var q = 0; q < items.length; q++) {
      var k = items[q];
      if (!vis(k)) continue;
      if (ix(k) >= vx0 && ix(k) <= vx1 && iy(k) >= vy0 && iy(k) <= vy1) inView++;
      var ro = roleOf(k), w = iw(k), h = ih(k), x = ix(k) - w / 2, y = iy(k) - h / 2;
      ctx.beginPath();
      if (s < 0.08) {  // far away: a filled block, at least 4 px
        var mw = Math.max(w, 4 / s), mh = Math.max(h, 4 / s);
        ctx.fillStyle = k >= N ? ro.border : ro.fill; ctx.strokeStyle = ro.border; ctx.lineWidth = 1 / s;
        ctx.rect(ix(k) - mw / 2, iy(k) - mh / 2, mw, mh); ctx.fill(); ctx.stroke(); continue;
      }
      rrect(x, y, w, h, 6);
      var isInput = k < N && D.names[k] !== undefined;
      var loopBox = k >= N && isLoop[k - N];
      ctx.fillStyle = loopBox ? "#f3eaf7" : k >= N ? "#fff" : (isInput ? "#fff2cc" : ro.fill);
      ctx.fill();
      ctx.setLineDash(ro.dashed && !loopBox ? [4, 3] : []);
      ctx.lineWidth = k >= N ? 2.5 : (k < N && users[k].length > 1 ? 2 : 1);
      ctx.strokeStyle = loopBox ? "#813d9c" : ro.border;
      ctx.stroke();
      ctx.setLineDash([]);
      if (k >= N) { ctx.beginPath(); rrect(x + 4, y + 4, w, h, 6); ctx.lineWidth = 1; ctx.stroke(); }
      if (k < N && PORT[k] !== undefined) {  // a loop's carry input/output (or a loop node's output): a purple tab
        ctx.beginPath(); ctx.rect(x, y + 3, 5, h - 6); ctx.fillStyle = "#813d9c"; ctx.fill();
        if (text) {
          ctx.font = "9px sans-serif"; ctx.fillStyle = "#613583";
          ctx.fillText(fitText(PORT[k], w + 20), ix(k), y - 5); ctx.font = "11px monospace";
        }
      }
      if (k < N && isOut[k]) { ctx.beginPath(); rrect(x - 3, y - 3, w + 6, h + 6, 8); ctx.lineWidth = 1; ctx.stroke(); }
      var mark = k === selItem() ? "#e66100" : (hiIn && hiIn.has(k)) ? "#1a5fb4" : (hiOut && hiOut.has(k)) ? "#c01c28"
        : (matchSet && matchSet.has(k)) ? "#f6d32d" : null;
      if (mark) { ctx.beginPath(); rrect(x - 5, y - 5, w + 10, h + 10, 9); ctx.lineWidth = 3; ctx.strokeStyle = mark; ctx.stroke(); }
      if (text) {
        ctx.fillStyle = "#111";
        if (k < N) {
          ctx.fillText(fitText(nid(k) + " " + (isInput ? D.names[k] : opLabel(k)), w - 6), ix(k), iy(k) - 7);
          ctx.fillStyle = "#555";
          ctx.fillText(fitText(typeStr(k), w - 6), ix(k), iy(k) + 8);
        } else {
          var g = D.regions[k - N];
          ctx.fillText(fitText(g.loop ? "\u27f3 " + g.loop.name + (g.loop.steps !== null ? " ×" + g.loop.steps : "") + ": " + g.loop.body + " body nodes"
            : g.count + " nodes: " + g.ops.map(function (p) { return p[0] + "×" + p[1]; }).join(" "), w - 6), ix(k), iy(k) - 8);
          ctx.fillStyle = "#555";
          ctx.fillText(fitText(g.label, w - 6), ix(k), iy(k) + 9);
        }
      }
    }
    $("sg-count").dataset.inView = inView;
  }

  function edgePath(a, b) {
    var x0 = ix(a), y0 = iy(a) + ih(a) / 2, x1 = ix(b), y1 = iy(b) - ih(b) / 2;
    ctx.moveTo(x0, y0);
    if (y1 - y0 < 90 && y1 > y0) { ctx.lineTo(x1, y1); return; }
    var d = Math.max(40, Math.abs(y1 - y0) / 3);
    ctx.bezierCurveTo(x0, y0 + d, x1, y1 - d, x1, y1);
  }

  function selItem() { return selected < 0 ? -1 : (selected < N ? itemOf(selected) : selected); }

  // ---- hit testing, selection, details ----
  function hit(px, py) {
    var wx = (px - view.tx) / view.s, wy = (py - view.ty) / view.s, best = -1;
    for (var q = items.length - 1; q >= 0; q--) {
      var k = items[q];
      if (Math.abs(wx - ix(k)) <= iw(k) / 2 + 2 && Math.abs(wy - iy(k)) <= ih(k) / 2 + 2) { best = k; break; }
    }
    return best;
  }

  function el(tag, text, cls) { var e = document.createElement(tag); if (text !== undefined) e.textContent = text; if (cls) e.className = cls; return e; }
  function link(n) {
    var a = el("span", nid(n) + " " + (D.names[n] !== undefined ? D.names[n] : D.ops[D.op[n]]), "sg-link");
    a.dataset.node = n;
    a.addEventListener("click", function () { select(n, true); });
    return a;
  }
  function row(t, k, v) {
    var tr = el("tr"), td = el("td", k, "k"), tv = el("td");
    tr.dataset.key = k;
    if (v instanceof Node) tv.appendChild(v); else tv.textContent = v;
    tr.appendChild(td); tr.appendChild(tv); t.appendChild(tr);
  }
  function links(list) {
    var span = el("span");
    if (!list.length) span.textContent = "none";
    list.slice(0, 60).forEach(function (n) { span.appendChild(link(n)); });
    if (list.length > 60) span.appendChild(el("span", "… " + (list.length - 60) + " more"));
    return span;
  }

  function openTo(n) {  // expand every region around node n; true when one was collapsed
    var any = false;
    for (var r = D.region[n]; r >= 0; r = rpar[r]) if (collapsed[r]) { collapsed[r] = 0; any = true; }
    return any;
  }
  function loopOf(n) { for (var r = D.region[n]; r >= 0; r = rpar[r]) if (isLoop[r]) return r; return -1; }

  function select(k, center) {
    if (k >= 0 && k < N && center && openTo(k)) rebuild();
    selected = k;
    hiIn = hiOut = null;
    var det = $("sg-details");
    det.textContent = "";
    det.dataset.selected = k < 0 ? "" : (k < N ? nid(k) : "region " + (k - N));
    if (k < 0) { det.appendChild(el("p", "Nothing selected.", "sg-hint")); draw(); return; }
    var t = el("table");
    if (k < N) {
      var ins = argsOf(k), us = users[k], ro = D.roles[D.role[k]];
      hiIn = new Set(D.ins[k].map(itemOf)); hiOut = new Set(dusers[k].map(itemOf));
      det.appendChild(el("h3", nid(k) + " = " + (D.names[k] !== undefined ? "input " + D.names[k] : opLabel(k))));
      row(t, "op", D.ops[D.op[k]]);
      if (D.attrs[k]) row(t, "attrs", D.attrs[k]);
      row(t, "shape", "(" + D.shape[k].join(", ") + (D.shape[k].length === 1 ? ",)" : ")"));
      row(t, "dtype", D.dtypes[D.dtype[k]]);
      row(t, "role", ro.text);
      row(t, "source", D.file[k] >= 0 ? D.files[D.file[k]] : "unknown");
      if (D.origin[k] >= 0) row(t, "derivative of", "the forward op " + D.ops[D.origin[k]] + " at " + (D.loc[k] >= 0 ? D.locs[D.loc[k]] : "its line"));
      if (D.tag[k]) row(t, "tag", D.tag[k]);
      if (isOut[k]) row(t, "output", "output " + D.outputs.indexOf(k));
      if (PORT[k] !== undefined) row(t, "loop port", PORT[k]);
      var lr = loopOf(k);
      if (lr >= 0) row(t, "in loop", D.regions[lr].label);
      row(t, "inputs (" + ins.length + ")", links(ins));
      if (ARGS[k] !== undefined && D.ins[k].length) {  // a loop body's input, or a loop node: where it comes from
        row(t, ins.length ? "from the body" : "bound to", links(D.ins[k]));
      }
      // a reader that takes the value twice (mul(h, h)) is listed once; the uses count both
      var uniq = us.filter(function (u, q) { return us.indexOf(u) === q; });
      row(t, "readers (" + uniq.length + (uniq.length < us.length ? "; " + us.length + " uses" : "") + ")", links(uniq));
      if (D.region[k] >= 0) {
        var rk = D.region[k], rb = el("button", "collapse " + (isLoop[rk] ? "loop" : "region") + " (" + D.regions[rk].count + " nodes)");
        rb.addEventListener("click", function () { setRegion(rk, 1); });
        row(t, "region", rb);
      }
    } else {
      var g = D.regions[k - N];
      det.appendChild(el("h3", (g.loop ? "loop: " : "region: ") + g.label));
      if (g.loop) {
        row(t, "loop", g.loop.op + (g.loop.steps !== null ? ", " + g.loop.steps + " steps" : ""));
        row(t, "body nodes", String(g.loop.body));
        row(t, "outputs", links(g.loop.sibs));
      }
      row(t, "nodes", String(g.count));
      row(t, "role", D.roles[g.role].text);
      row(t, "ops", g.ops.map(function (p) { return p[0] + " ×" + p[1]; }).join(", "));
      var eb = el("button", "expand");
      eb.id = "sg-expand-selected";
      eb.addEventListener("click", function () { setRegion(k - N, 0); });
      row(t, "", eb);
      row(t, "members", links(rmem[k - N]));
    }
    det.appendChild(t);
    if (center) centerOn(selItem()); else draw();
  }

  function fixSelection() {  // after a change: the selection's box when it is hidden, a member when its box opened
    if (selected < 0) return;
    if (selected < N) { selected = itemOf(selected); return; }
    var r = selected - N, v = repR[r];
    if (v >= 0) selected = v; else selected = rmem[r].length ? rmem[r][0] : -1;
  }

  function setRegion(r, c) {
    collapsed[r] = c;
    rebuild();
    fixSelection();
    select(selected, false);
  }

  function setAll(c) { collapsed.fill(c); rebuild(); fixSelection(); if (selected >= 0) select(selected, false); }

  // ---- search ----
  function search(q) {
    q = q.trim().toLowerCase();
    matches = []; matchAt = -1;
    var res = $("sg-results"); res.textContent = "";
    if (q) {
      var idq = q.charAt(0) === "%" ? q.slice(1) : null;
      for (var n = 0; n < N; n++) {
        if (idq !== null ? String(D.ids[n]) === idq :
          (D.ops[D.op[n]].toLowerCase().indexOf(q) >= 0 || (D.names[n] !== undefined && D.names[n].toLowerCase().indexOf(q) >= 0)
           || (D.loc[n] >= 0 && D.locs[D.loc[n]].toLowerCase().indexOf(q) >= 0) || D.attrs[n].toLowerCase().indexOf(q) >= 0)) matches.push(n);
      }
      matches.slice(0, 200).forEach(function (n) {
        var d = el("div", nid(n) + " " + opLabel(n) + " : " + typeStr(n) + "  " + D.roles[D.role[n]].name + (D.loc[n] >= 0 ? ", " + D.locs[D.loc[n]] : ""));
        d.dataset.node = n;
        d.addEventListener("click", function () { select(n, true); });
        res.appendChild(d);
      });
    }
    var c = $("sg-search-count");
    c.textContent = q ? matches.length + " match" + (matches.length === 1 ? "" : "es") : "";
    c.dataset.matches = matches.length;
    draw();
  }
  function nextMatch(step) {
    if (!matches.length) return;
    matchAt = (matchAt + step + matches.length) % matches.length;
    select(matches[matchAt], true);
  }

  // ---- role chips: collapse / expand every region of a role ----
  function chips() {
    var box = $("sg-roles"); box.textContent = "";
    D.roles.forEach(function (ro, ri) {
      var rs = [], nc = 0;
      for (var r = 0; r < R; r++) if (D.regions[r].role === ri) { rs.push(r); nc += collapsed[r]; }
      var c = el("span", undefined, "sg-chip" + (nc ? " sg-off" : ""));
      var sw = el("span", undefined, "sg-sw"); sw.style.background = ro.fill; sw.style.borderColor = ro.border;
      c.appendChild(sw); c.appendChild(el("span", ro.name + " " + ro.count));
      c.dataset.role = ro.name;
      c.title = rs.length ? (nc ? "expand" : "collapse") + " the " + rs.length + " " + ro.name + " regions" : ro.text;
      c.addEventListener("click", function () {
        var to = nc ? 0 : 1;
        rs.forEach(function (r) { collapsed[r] = to; });
        rebuild(); fixSelection(); if (selected >= 0) select(selected, false);
      });
      box.appendChild(c);
    });
  }

  // ---- mouse and keys ----
  var drag = null, moved = false;
  canvas.addEventListener("mousedown", function (ev) { drag = { x: ev.clientX, y: ev.clientY, tx: view.tx, ty: view.ty }; moved = false; canvas.classList.add("sg-drag"); });
  window.addEventListener("mousemove", function (ev) {
    if (!drag) return;
    var dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) moved = true;
    view.tx = drag.tx + dx; view.ty = drag.ty + dy; draw();
  });
  window.addEventListener("mouseup", function () { drag = null; canvas.classList.remove("sg-drag"); });
  function local(ev) { var r = canvas.getBoundingClientRect(); return [ev.clientX - r.left, ev.clientY - r.top]; }
  canvas.addEventListener("click", function (ev) { if (moved) return; var p = local(ev); select(hit(p[0], p[1]), false); });
  canvas.addEventListener("dblclick", function (ev) {
    var p = local(ev), k = hit(p[0], p[1]);
    if (k >= N) setRegion(k - N, 0); else if (k >= 0 && D.region[k] >= 0) setRegion(D.region[k], 1);
  });
  canvas.addEventListener("wheel", function (ev) {
    ev.preventDefault();
    var p = local(ev), f = Math.exp(-ev.deltaY * (ev.deltaMode === 1 ? 0.05 : 0.0015));
    var s = Math.min(8, Math.max(0.005, view.s * f));
    view.tx = p[0] - (p[0] - view.tx) * s / view.s; view.ty = p[1] - (p[1] - view.ty) * s / view.s; view.s = s;
    draw();
  }, { passive: false });
  $("sg-search").addEventListener("input", function (ev) { search(ev.target.value); });
  $("sg-search").addEventListener("keydown", function (ev) { if (ev.key === "Enter") nextMatch(ev.shiftKey ? -1 : 1); });
  $("sg-fit").addEventListener("click", function () { fit(); });
  $("sg-expand-all").addEventListener("click", function () { setAll(0); fit(); });
  $("sg-collapse-all").addEventListener("click", function () { setAll(1); fit(); });
  window.addEventListener("keydown", function (ev) {
    if (ev.target.tagName === "INPUT") return;
    if (ev.key === "f") fit();
    if (ev.key === "Escape") select(-1, false);
    if (ev.key === "/") { ev.preventDefault(); $("sg-search").focus(); }
  });
  window.addEventListener("resize", resize);

  // ---- the URL fragment drives the page:
  //      #expand=all|R&collapse=all|R&chip=ROLE&dblclick=ID&search=Q&next&select=ID&click=ID (in that order) ----
  function byId(v) { var want = String(v).replace("%", ""); for (var n = 0; n < N; n++) if (String(D.ids[n]) === want) return n; return -1; }
  function applyHash() {
    var h = location.hash.slice(1);
    if (!h) return;
    var p = new URLSearchParams(h);
    // expanding or collapsing everything changes the whole layout: the view is fitted to it again, as the
    // buttons do (one region opened keeps the view, so that what was on screen stays put)
    if (p.has("expand")) { if (p.get("expand") === "all") { setAll(0); fit(); } else setRegion(Number(p.get("expand")), 0); }
    if (p.has("collapse")) { if (p.get("collapse") === "all") { setAll(1); fit(); } else setRegion(Number(p.get("collapse")), 1); }
    if (p.has("chip")) {  // a click on a role chip (collapse / expand every region of that role)
      var chip = document.querySelector('.sg-chip[data-role="' + p.get("chip") + '"]');
      if (chip) chip.click();
    }
    if (p.has("dblclick")) { var dn = byId(p.get("dblclick")); if (dn >= 0) mouseAt("dblclick", itemOf(dn)); }
    if (p.has("search")) { $("sg-search").value = p.get("search"); search(p.get("search")); if (p.has("next")) nextMatch(1); }
    if (p.has("select")) select(byId(p.get("select")), true);
    if (p.has("click")) { var n = byId(p.get("click")); if (n >= 0) mouseAt("click", itemOf(n)); }
  }
  function mouseAt(type, k) {  // a real mouse event at item k's place on the canvas (exercises hit testing)
    centerOn(k);
    var rect = canvas.getBoundingClientRect();
    canvas.dispatchEvent(new MouseEvent(type, { clientX: rect.left + view.tx + view.s * ix(k),
      clientY: rect.top + view.ty + view.s * iy(k), bubbles: true }));
  }
  window.addEventListener("hashchange", applyHash);

  resize();
  rebuild();
  fit();
  applyHash();
  paint();
  document.body.dataset.ready = "1";
})();
