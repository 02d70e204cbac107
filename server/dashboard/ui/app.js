// idmint dashboard: polls /ui/api/state and renders it. No framework, no
// network access beyond this server; every value from the server goes into
// the page as text (textContent), never as markup.
"use strict";

(function () {
  const POLL_MS = 2000;
  const TOKEN_KEY = "idmint-admin-token";
  const $ = (id) => document.getElementById(id);
  const SVG = "http://www.w3.org/2000/svg";
  let timer = null;
  let last = null; // last state, for the admin forms

  function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

  function headers(extra) {
    const h = Object.assign({}, extra || {});
    const t = token();
    if (t) h.Authorization = "Bearer " + t;
    return h;
  }

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }

  function fmtNum(v) {
    if (v === undefined || v === null || Number.isNaN(v)) return "—";
    return Math.round(v).toLocaleString("en-US");
  }

  function fmtRate(v) {
    if (v === null || v === undefined) return "—";
    if (v >= 100) return fmtNum(v);
    if (v >= 10) return v.toFixed(1);
    return v.toFixed(2);
  }

  // utc renders an instant as the rest of idmint does: UTC, 24-hour.
  function utc(ms) {
    return new Date(ms).toISOString().slice(11, 19) + " UTC";
  }

  // horizonCell explains the horizon: the latest time the node may stamp
  // before it must record a new one. It is extended ahead of demand, so on
  // an idle key it lies in the past, which is normal.
  function horizonCell(v) {
    if (v === undefined || v === null) return { text: "—", cls: "num" };
    if (v < 0) return { text: "passed " + fmtSecs(-v) + " ago (idle)", cls: "num muted", title: "The horizon is the latest time this node may stamp IDs without recording a new one in its coordinator. It is extended just before it is needed, so on an idle key it lies in the past: normal. The next ID extends it first." };
    return { text: fmtSecs(v), cls: "num", title: "Time left before this node must record a new horizon (it does so ahead of time, in the background)." };
  }

  function fmtSecs(v) {
    if (v === undefined || v === null) return "—";
    const a = Math.abs(v);
    if (a < 1) return (v * 1000).toFixed(0) + " ms";
    if (a < 120) return v.toFixed(1) + " s";
    if (a < 7200) return (v / 60).toFixed(1) + " min";
    return (v / 3600).toFixed(1) + " h";
  }

  function yesNo(b) { return el("span", b ? "yes" : "no", b ? "yes" : "no"); }

  function row(tbody, cells, attrs) {
    const tr = document.createElement("tr");
    for (const [k, v] of Object.entries(attrs || {})) tr.setAttribute(k, v);
    for (const c of cells) {
      let td;
      if (c instanceof Node) { td = el("td"); td.appendChild(c); }
      else if (c && typeof c === "object") {
        td = el("td", c.text, c.cls);
        if (c.node) td.appendChild(c.node);
        if (c.field) td.dataset.field = c.field;
        if (c.title) td.title = c.title;
      } else td = el("td", c);
      tr.appendChild(td);
    }
    tbody.appendChild(tr);
  }

  function fill(id, build) {
    const tbody = $(id).querySelector("tbody");
    const body = document.createElement("tbody");
    build(body);
    tbody.replaceWith(body);
    return body.children.length;
  }

  // rates turns [unix ms, issued] samples (plus the live count) into
  // [unix ms, IDs per second] points.
  function rates(history, nowMs, issued) {
    const pts = (history || []).slice();
    if (pts.length === 0 || nowMs - pts[pts.length - 1][0] >= 1000) pts.push([nowMs, issued]);
    const out = [];
    for (let i = 1; i < pts.length; i++) {
      const dt = (pts[i][0] - pts[i - 1][0]) / 1000;
      if (dt > 0) out.push([pts[i][0], Math.max(0, (pts[i][1] - pts[i - 1][1]) / dt)]);
    }
    return out;
  }

  function spark(points, nowMs, windowMs, sampleMs) {
    const w = 140, h = 30;
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("class", "spark");
    svg.setAttribute("viewBox", "0 0 " + w + " " + h);
    svg.setAttribute("preserveAspectRatio", "none");
    svg.setAttribute("role", "img");
    const peak = points.reduce((m, p) => Math.max(m, p[1]), 0);
    // The x axis spans the samples there are (at least a minute), up to the
    // window the server keeps: a young chart fills its box too.
    const from = points.length ? points[0][0] - sampleMs : nowMs;
    const span = Math.min(windowMs, Math.max(60000, nowMs - from));
    const title = document.createElementNS(SVG, "title");
    title.textContent = "IDs per second over the last " + fmtSecs(span / 1000) + "; peak " + fmtRate(peak) + "/s";
    svg.appendChild(title);
    if (points.length === 0) return svg;
    const x = (t) => Math.max(0, w - ((nowMs - t) / span) * w);
    const y = (v) => h - 1 - (peak > 0 ? (v / peak) * (h - 3) : 0);
    const xy = points.map((p) => x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1));
    if (points.length === 1) xy.unshift((x(points[0][0]) - 2).toFixed(1) + "," + y(points[0][1]).toFixed(1));
    const line = document.createElementNS(SVG, "polyline");
    line.setAttribute("points", xy.join(" "));
    const area = document.createElementNS(SVG, "polygon");
    area.setAttribute("points", xy[0].split(",")[0] + "," + h + " " + xy.join(" ") + " " + xy[xy.length - 1].split(",")[0] + "," + h);
    svg.appendChild(area);
    svg.appendChild(line);
    return svg;
  }

  // liveStep shows the step of the segment being served: it grows with
  // demand (Leaf's dynamic step) from the configured one.
  function liveStep(s, configured) {
    const cur = s.slots && s.slots[s.current];
    const live = cur && cur.step ? cur.step : configured;
    const text = fmtNum(live) + (live !== configured ? " (set " + fmtNum(configured) + ")" : "");
    return { text: text, cls: "num", field: "step", title: "The size of the segment now being served. It starts at the configured step; after a segment that lasted under 15 minutes the next one doubles (up to 1,000,000), after one that lasted 30 minutes or more it halves, never below the configured step (Leaf's dynamic step)." };
  }

  function slotCell(slot, current) {
    const span = el("span", null, "slot" + (current ? " cur" : ""));
    if (!slot || slot.step === 0) { span.textContent = "empty"; span.classList.add("muted"); return span; }
    const bar = el("span", null, "bar");
    const fillEl = el("i");
    fillEl.style.width = Math.max(0, Math.min(100, slot.fill * 100)).toFixed(0) + "%";
    bar.appendChild(fillEl);
    span.appendChild(bar);
    span.appendChild(document.createTextNode(fmtNum(slot.value) + " → " + fmtNum(slot.max) + " "));
    span.appendChild(el("small", (slot.fill * 100).toFixed(0) + "% left" + (current ? " · serving" : "")));
    return span;
  }

  function render(st) {
    last = st;
    const nowMs = Date.parse(st.now);
    const windowMs = st.sample_every_ms * st.samples_kept;
    const keys = st.keys || [];

    const n = fill("keys", (tb) => {
      for (const k of keys) {
        const rs = k.volume_hidden ? [] : rates(k.history, nowMs, k.issued);
        const now = rs.length ? rs[rs.length - 1][1] : null;
        row(tb, [
          { text: k.name, field: "name" },
          { text: k.strategy + (k.layout ? " (" + k.layout + ")" : ""), field: "strategy" },
          { node: yesNo(k.ready), field: "ready" },
          { text: k.volume_hidden ? "hidden" : fmtNum(k.issued), cls: "num", field: "issued" },
          { text: k.volume_hidden ? "hidden" : fmtRate(now), cls: "num", field: "rate" },
          { node: spark(rs, nowMs, windowMs, st.sample_every_ms), field: "chart" },
        ], { "data-key": k.name });
      }
    });
    $("keys-empty").hidden = n > 0;
    // The server sends at most st.limit keys: say how many there are.
    let count = "";
    if (st.keys_matched > keys.length) count = "showing the first " + fmtNum(keys.length) + " of " + fmtNum(st.keys_matched) + (st.filter ? " matching" : "") + " keys; filter to see others";
    else if (st.filter) count = fmtNum(st.keys_matched) + " of " + fmtNum(st.keys_total) + " keys match";
    $("keys-count").textContent = count;

    const segs = keys.filter((k) => k.segment);
    $("segments-section").hidden = segs.length === 0;
    fill("segments", (tb) => {
      for (const k of segs) {
        const s = k.segment, stats = k.stats || {};
        let next = s.next_ready ? "loaded" : "not loaded";
        if (stats.segment_store_failing) next = "store failing, retrying";
        next += " · " + fmtNum(stats.segment_loads_total) + " loads";
        if (stats.segment_load_errors_total) next += ", " + fmtNum(stats.segment_load_errors_total) + " failed";
        if (stats.segment_store_went_back_total) next += " · store went back " + fmtNum(stats.segment_store_went_back_total) + "× (failover or restore?), raised above the witness";
        row(tb, [
          { text: k.name, field: "name" },
          { node: slotCell(s.slots[0], s.current === 0), field: "slot0" },
          { node: slotCell(s.slots[1], s.current === 1), field: "slot1" },
          liveStep(s, k.step),
          { text: next, field: "next" },
        ], { "data-key": k.name });
      }
    });

    const leases = (st.resources || []).filter((r) => r.stats && "lease_held" in r.stats);
    const clocks = keys.filter((k) => k.stats && ("clock_rollback_total" in k.stats || "snowflake_horizon_seconds" in k.stats));
    $("leases-section").hidden = leases.length === 0 && clocks.length === 0;
    fill("leases", (tb) => {
      for (const r of leases) {
        const s = r.stats;
        const fence = !("lease_valid_seconds" in s) ? "—" : s.lease_valid_seconds < 0 ? "never expires" : fmtSecs(s.lease_valid_seconds);
        row(tb, [r.name, { text: s.worker_id >= 0 ? fmtNum(s.worker_id) : "none", cls: "num" },
          { text: fmtNum(s.lease_generation), cls: "num" }, yesNo(s.lease_held === 1), { text: fence, cls: "num", field: "fence" }],
          { "data-resource": r.name });
      }
    });
    fill("clocks", (tb) => {
      for (const k of clocks) {
        const s = k.stats;
        row(tb, [k.name, horizonCell(s.snowflake_horizon_seconds),
          { text: fmtSecs(s.snowflake_ahead_seconds), cls: "num" },
          { text: fmtNum(s.clock_rollback_total), cls: "num", field: "rollbacks" }], { "data-key": k.name });
      }
    });

    const mono = keys.filter((k) => k.stats && "monotonic_leader" in k.stats);
    $("monotonic-section").hidden = mono.length === 0;
    fill("monotonic", (tb) => {
      for (const k of mono) {
        const s = k.stats;
        row(tb, [k.name, yesNo(s.monotonic_leader === 1), { text: fmtNum(s.monotonic_bound_headroom), cls: "num" },
          { text: fmtNum(s.monotonic_failovers_total), cls: "num" }, { text: fmtNum(s.monotonic_forwarded_total), cls: "num" },
          { text: fmtNum(s.monotonic_forwarded_served_total), cls: "num" }], { "data-key": k.name });
      }
    });

    const ol = el("ol");
    ol.id = "errors";
    for (const e of st.errors || []) {
      const li = el("li");
      const t = el("time", utc(Date.parse(e.time)));
      t.setAttribute("datetime", e.time);
      li.appendChild(t);
      li.appendChild(document.createTextNode(" " + e.key + " (" + e.strategy + ") " + e.code + (e.count > 1 ? " ×" + e.count : "") + ": " + e.error));
      ol.appendChild(li);
    }
    $("errors").replaceWith(ol);
    $("errors-empty").hidden = (st.errors || []).length > 0;

    const sel = $("step-key"), chosen = sel.value;
    sel.replaceChildren(...segs.map((k) => { const o = el("option", k.name); o.value = k.name; return o; }));
    if (segs.some((k) => k.name === chosen)) sel.value = chosen;
    const dl = $("strategies");
    if (dl.children.length !== (st.strategies || []).length) {
      dl.replaceChildren(...(st.strategies || []).map((s) => { const o = el("option"); o.value = s; return o; }));
    }

    $("updated").textContent = utc(nowMs);
    const si = $("create-strategy");
    if ((st.strategies || []).length) {
      // Strategy names are letters, digits and . _ : - (CheckName); only
      // the dot needs escaping (the pattern is compiled with the v flag,
      // where escaping "-" outside a class is a syntax error).
      si.pattern = "(" + st.strategies.map((x) => x.replaceAll(".", "\\.")).join("|") + ")";
      si.title = "one of: " + st.strategies.join(", ");
    }
  }

  function setStatus(text, bad) {
    const s = $("status");
    s.textContent = text;
    s.classList.toggle("bad", !!bad);
  }

  async function errorText(resp) {
    try {
      const b = await resp.json();
      if (b && b.error) return b.error.message + (b.error.field ? " (" + b.error.field + ")" : "");
    } catch (e) { /* not JSON */ }
    return "HTTP " + resp.status;
  }

  async function poll() {
    clearTimeout(timer);
    try {
      const f = $("key-filter").value.trim();
      const resp = await fetch("/ui/api/state" + (f ? "?filter=" + encodeURIComponent(f) : ""), { headers: headers(), cache: "no-store" });
      if (resp.status === 401 || resp.status === 403) {
        setStatus(resp.status === 401 ? "admin token required" : "token refused", true);
        $("token-form").hidden = false;
        $("token-msg").textContent = await errorText(resp);
        $("token-msg").className = "msg bad";
      } else if (!resp.ok) {
        setStatus("server answered " + resp.status + ": " + (await errorText(resp)), true);
      } else {
        render(await resp.json());
        setStatus("live", false);
        document.body.dataset.loaded = "1";
      }
    } catch (e) {
      setStatus("server unreachable", true);
    }
    timer = setTimeout(poll, POLL_MS);
  }

  async function admin(method, path, body) {
    const msg = $("admin-msg");
    msg.className = "msg";
    msg.textContent = "…";
    try {
      const resp = await fetch(path, { method, headers: headers({ "Content-Type": "application/json" }), body: JSON.stringify(body), cache: "no-store" });
      if (!resp.ok) {
        msg.className = "msg bad";
        msg.textContent = await errorText(resp);
        if (resp.status === 401 || resp.status === 403) $("token-form").hidden = false;
        return false;
      }
      msg.className = "msg ok";
      msg.textContent = "done";
      poll();
      return true;
    } catch (e) {
      msg.className = "msg bad";
      msg.textContent = "server unreachable";
      return false;
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("token-toggle").addEventListener("click", () => { $("token-form").hidden = !$("token-form").hidden; });
    $("token-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
      $("token").value = "";
      $("token-msg").textContent = "";
      $("token-form").hidden = true;
      poll();
    });
    let filterTimer;
    $("key-filter").addEventListener("input", () => { clearTimeout(filterTimer); filterTimer = setTimeout(poll, 250); });
    $("token-clear").addEventListener("click", () => { sessionStorage.removeItem(TOKEN_KEY); $("token-msg").textContent = "forgotten"; poll(); });
    $("create-form").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const body = { name: $("create-name").value.trim(), strategy: $("create-strategy").value.trim() };
      const step = $("create-step").value;
      if (step !== "") body.step = Number(step);
      if (await admin("POST", "/v1/keys", body)) $("create-form").reset();
    });
    $("step-form").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const k = $("step-key").value;
      if (!k) return;
      if (await admin("PATCH", "/v1/keys/" + encodeURIComponent(k), { step: Number($("step-value").value) })) $("step-value").value = "";
    });
    poll();
  });
})();
