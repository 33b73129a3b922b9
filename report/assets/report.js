// harness report: the case list (virtualized: only the rows in view are in
// the DOM), the filters and the trajectory viewer. Data comes from the JSON
// blocks of the page: #report-index at load, and a chunk of full records
// (script.trial-data) the first time one of its trials is opened. Nothing is
// fetched; all text goes in through textContent.
(function () {
  "use strict";

  var ROW = 30;            // row height in px, as in the CSS
  var OVERSCAN = 12;       // rows rendered above and below the view
  var STRIP_MAX = 40;      // trial squares shown per row
  var PRE_MAX = 6000;      // characters shown before "show all"
  var CACHE_MAX = 8;       // parsed record chunks kept

  var IX = JSON.parse(document.getElementById("report-index").textContent);
  var compare = IX.runs.length === 2;
  var multi = IX.runs.length > 2;
  var several = IX.runs.length > 1;
  var STATUSES = ["pass", "fail", "flaky", "error", "ungraded"];
  var state = { statuses: {}, cat: "", chg: "", text: "", shown: [], open: -1, run: 0, trial: 0, hidden: {}, sort: "", desc: false };
  STATUSES.forEach(function (s) { state.statuses[s] = true; });
  var byId = {};
  IX.cases.forEach(function (c, i) {
    byId[c.id] = i;
    c.pos = i;
    var s0 = c.sides[0];
    c.hay = (c.id + "\n" + (c.input || "")).toLowerCase();
    if (s0 && !several) {
      // The columns of a single run: the output of the trial the case
      // opens on, and the mean score and duration and the cost of its trials.
      var tr = s0.tr || [], sc = 0, nsc = 0, d = 0, cost = null, shown = null;
      tr.forEach(function (t) {
        if (t.sc != null) { sc += t.sc; nsc++; }
        d += t.d || 0;
        if (t.cost != null) cost = (cost || 0) + t.cost;
        if (!shown && (t.s === "fail" || t.s === "error")) shown = t;
      });
      shown = shown || tr[0];
      c.out = shown && shown.out || "";
      c.sc = nsc ? sc / nsc : null;
      c.dur = tr.length ? d / tr.length : null;
      c.cost = cost;
      c.rate = s0.n ? s0.c / s0.n : -1;
      c.errs = errTotal(s0);
      c.hay += "\n" + c.out.toLowerCase();
    }
  });
  var chunks = {}, chunkOrder = [];

  function $(id) { return document.getElementById(id); }

  // The transcript renderer is shared with harness view (transcript.js).
  var HT = window.HarnessTranscript;
  var el = HT.el, add = HT.add, pre = HT.pre, pct = HT.pct, ms = HT.ms, iso = HT.iso;
  function classes(m) {
    if (!m) return "";
    return Object.keys(m).sort().map(function (k) { return k + " " + m[k]; }).join(", ");
  }
  function errTotal(side) {
    var t = 0;
    if (side && side.err) for (var k in side.err) t += side.err[k];
    return t;
  }

  // ---------- filters and the case list ----------

  function caseStatuses(c) {
    var out = [];
    c.sides.forEach(function (s) { if (s) out.push(s.st); });
    return out;
  }

  function matches(c) {
    var sts = caseStatuses(c), ok = false;
    for (var i = 0; i < sts.length; i++) if (state.statuses[sts[i]]) ok = true;
    if (!ok) return false;
    if (state.cat && c.cat !== state.cat) return false;
    if (state.chg) {
      if (state.chg === "changed") { if (c.chg !== "gained" && c.chg !== "lost") return false; }
      else if (c.chg !== state.chg) return false;
    }
    if (state.text && c.hay.indexOf(state.text) < 0) return false;
    return true;
  }

  var STATUS_ORDER = { error: 0, fail: 1, flaky: 2, ungraded: 3, pass: 4 };
  // sortKeys: the value each sortable column orders by.
  var sortKeys = {
    status: function (c) { return STATUS_ORDER[c.sides[0].st]; },
    id: function (c) { return c.id; },
    cat: function (c) { return c.cat || ""; },
    rate: function (c) { return c.rate; },
    output: function (c) { return c.out; },
    score: function (c) { return c.sc == null ? -1 : c.sc; },
    duration: function (c) { return c.dur == null ? -1 : c.dur; },
    cost: function (c) { return c.cost == null ? -1 : c.cost; },
    errors: function (c) { return c.errs; }
  };

  function applyFilters() {
    var shown = [];
    for (var i = 0; i < IX.cases.length; i++) if (matches(IX.cases[i])) shown.push(i);
    var key = sortKeys[state.sort];
    if (key) {
      var dir = state.desc ? -1 : 1;
      shown.sort(function (a, b) {
        var x = key(IX.cases[a]), y = key(IX.cases[b]);
        if (x < y) return -dir;
        if (x > y) return dir;
        return a - b;
      });
    }
    state.shown = shown;
    $("shown-count").textContent = shown.length + " of " + IX.cases.length + " cases";
    $("case-rows").style.height = shown.length * ROW + "px";
    renderRows();
  }

  function setupFilters() {
    var counts = {};
    // A case counts once under each status that one of its runs has.
    IX.cases.forEach(function (c) {
      var seen = {};
      caseStatuses(c).forEach(function (s) { if (!seen[s]) { seen[s] = true; counts[s] = (counts[s] || 0) + 1; } });
    });
    document.querySelectorAll(".fcount").forEach(function (n) { n.textContent = counts[n.getAttribute("data-status")] || 0; });
    document.querySelectorAll("#filters input[name=status]").forEach(function (box) {
      box.addEventListener("change", function () { state.statuses[box.value] = box.checked; applyFilters(); });
    });
    var sel = $("filter-category");
    IX.categories.forEach(function (cat) { sel.appendChild(el("option", { value: cat, text: cat })); });
    if (!IX.categories.length) sel.disabled = true;
    sel.addEventListener("change", function () { state.cat = sel.value; applyFilters(); });
    var chg = $("filter-change");
    if (chg) chg.addEventListener("change", function () { state.chg = chg.value; applyFilters(); });
    var txt = $("filter-text"), timer = 0;
    txt.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(function () { state.text = txt.value.trim().toLowerCase(); applyFilters(); }, 120);
    });
  }

  function strip(side, label) {
    var s = el("span", { class: "strip" });
    if (label) s.appendChild(el("span", { class: "lab", text: label }));
    if (!side) { s.appendChild(el("span", { class: "more", text: "—" })); return s; }
    var tr = side.tr || [];
    for (var i = 0; i < tr.length && i < STRIP_MAX; i++) {
      var t = tr[i];
      s.appendChild(el("span", { class: "sq " + t.s, title: "trial " + t.t + ": " + t.s + (t.x && t.s !== "ungraded" ? " (" + t.x + ")" : "") }));
    }
    var miss = Math.min(side.miss || 0, Math.max(0, STRIP_MAX - tr.length));
    for (var j = 0; j < miss; j++) s.appendChild(el("span", { class: "sq missing", title: "no record" }));
    if (tr.length > STRIP_MAX) s.appendChild(el("span", { class: "more", text: "+" + (tr.length - STRIP_MAX) }));
    return s;
  }

  function setupList() {
    var head = $("case-head"), list = $("case-list");
    var cols = compare
      ? "64px minmax(90px, 1fr) minmax(40px, 110px) minmax(60px, 170px) minmax(60px, 170px)"
      : "58px minmax(80px, 1fr) minmax(36px, 84px) 34px minmax(40px, 96px) minmax(60px, 1fr) 38px 58px 50px 44px";
    var names = compare ? ["A → B", "case", "category", "A trials", "B trials"] : ["status", "case", "category", "c/n", "trials", "output", "score", "duration", "cost", "errors"];
    var sorts = several ? [] : ["status", "id", "cat", "rate", "", "output", "score", "duration", "cost", "errors"];
    if (multi) {
      cols = "minmax(90px, 1fr) minmax(40px, 110px)";
      names = ["case", "category"];
      IX.runs.forEach(function (r) { cols += " minmax(50px, 140px)"; names.push(r.label + " trials"); });
    }
    head.style.setProperty("--cols", cols);
    list.style.setProperty("--cols", cols);
    names.forEach(function (n, i) {
      var key = sorts[i];
      if (!key) { head.appendChild(el("span", { text: n })); return; }
      head.appendChild(el("button", { type: "button", class: "sorth", "data-sort": key, title: "sort by " + n, text: n, on: { click: function () {
        if (state.sort === key) state.desc = !state.desc; else { state.sort = key; state.desc = key === "duration" || key === "cost" || key === "errors"; }
        head.querySelectorAll(".sorth").forEach(function (b) { b.classList.toggle("on", b.getAttribute("data-sort") === state.sort); b.classList.toggle("desc", b.getAttribute("data-sort") === state.sort && state.desc); });
        applyFilters();
      } } }));
    });
    var pending = false;
    list.addEventListener("scroll", function () {
      if (pending) return;
      pending = true;
      requestAnimationFrame(function () { pending = false; renderRows(); });
    });
    window.addEventListener("resize", renderRows);
    $("case-rows").addEventListener("click", function (ev) {
      var row = ev.target.closest(".case-row");
      if (row) go(IX.cases[+row.getAttribute("data-index")].id);
    });
  }

  function rowEl(ci, pos) {
    var c = IX.cases[ci];
    var row = el("div", { class: "case-row" + (ci === state.open ? " open" : ""), "data-index": ci, "data-id": c.id, role: "button", style: "top:" + pos * ROW + "px" });
    if (multi) {
      row.appendChild(el("span", { class: "id", title: c.id, text: c.id }));
      row.appendChild(el("span", { class: "catc", title: c.cat || "", text: c.cat || "" }));
      c.sides.forEach(function (side, ri) { row.appendChild(strip(side, IX.runs[ri].label)); });
      return row;
    }
    if (compare) {
      row.appendChild(el("span", null, el("span", { class: "chg chg-" + c.chg, text: c.chg.replace("only-", "only ").replace("-", " ") })));
    } else {
      row.appendChild(el("span", null, el("span", { class: "pill st-" + c.sides[0].st, text: c.sides[0].st })));
    }
    row.appendChild(el("span", { class: "id", title: c.id, text: c.id }));
    row.appendChild(el("span", { class: "catc", title: c.cat || "", text: c.cat || "" }));
    if (compare) {
      row.appendChild(strip(c.sides[0], "A"));
      row.appendChild(strip(c.sides[1], "B"));
    } else {
      var s = c.sides[0];
      row.appendChild(el("span", { class: "cn", text: s.c + "/" + s.n }));
      row.appendChild(strip(s));
      row.appendChild(el("span", { class: "outc", title: c.out, text: c.out }));
      row.appendChild(el("span", { class: "cn", text: c.sc == null ? "" : c.sc.toFixed(2) }));
      row.appendChild(el("span", { class: "cn", text: c.dur == null ? "" : ms(Math.round(c.dur)) }));
      row.appendChild(el("span", { class: "cn", text: c.cost == null ? "" : HT.usd(c.cost) }));
      var e = errTotal(s);
      row.appendChild(el("span", { class: "cn", title: classes(s.err), text: e ? e + " err" : "" }));
    }
    return row;
  }

  function renderRows() {
    var list = $("case-list"), rows = $("case-rows");
    var n = state.shown.length;
    var h = list.clientHeight || 600;
    var first = Math.max(0, Math.floor(list.scrollTop / ROW) - OVERSCAN);
    var last = Math.min(n, Math.ceil((list.scrollTop + h) / ROW) + OVERSCAN);
    var frag = document.createDocumentFragment();
    for (var i = first; i < last; i++) frag.appendChild(rowEl(state.shown[i], i));
    rows.textContent = "";
    rows.appendChild(frag);
  }

  function scrollToCase(ci) {
    var pos = state.shown.indexOf(ci);
    if (pos < 0) return;
    var list = $("case-list");
    var top = pos * ROW;
    if (top < list.scrollTop || top + ROW > list.scrollTop + list.clientHeight) list.scrollTop = Math.max(0, top - list.clientHeight / 3);
    renderRows();
  }

  // ---------- navigation ----------

  function go(id, run, trial) {
    var h = "case=" + encodeURIComponent(id);
    if (run != null) h += "&run=" + run;
    if (trial != null) h += "&trial=" + trial;
    if (location.hash.slice(1) === h) route(); else location.hash = h;
  }

  function route() {
    var h = location.hash.replace(/^#/, "");
    if (!h) return;
    var p = {};
    h.split("&").forEach(function (kv) {
      var i = kv.indexOf("=");
      if (i > 0) {
        try { p[kv.slice(0, i)] = decodeURIComponent(kv.slice(i + 1)); } catch (e) { p[kv.slice(0, i)] = kv.slice(i + 1); }
      }
    });
    if (p["case"] == null || !(p["case"] in byId)) return;
    openCase(byId[p["case"]], p.run != null ? +p.run : null, p.trial != null ? +p.trial : null);
  }

  // ---------- the case view ----------

  function defaultTrial(c, run) {
    var side = c.sides[run];
    if (!side || !side.tr.length) return 0;
    for (var i = 0; i < side.tr.length; i++) if (side.tr[i].s === "fail" || side.tr[i].s === "error") return side.tr[i].t;
    return side.tr[0].t;
  }

  function openCase(ci, run, trial) {
    var c = IX.cases[ci];
    if (run == null || !c.sides[run]) {
      run = 0;
      while (run < c.sides.length - 1 && !c.sides[run]) run++;
      if (compare && trial == null && c.sides[1] && c.sides[0] && c.chg === "lost") run = 1;
    }
    if (trial == null) trial = defaultTrial(c, run);
    state.open = ci; state.run = run; state.trial = trial;
    scrollToCase(ci);
    var d = $("detail");
    d.textContent = "";
    d.appendChild(el("h3", { class: "caseid", text: c.id }));
    var kv = el("dl", { class: "kv" });
    function row(k, v) { if (v != null && v !== "") kv.appendChild(el("dt", { text: k })), kv.appendChild(el("dd", null, v)); }
    row("category", c.cat);
    row("input", c.input);
    row("expected", c.expected);
    if (compare) row("A → B", c.chg.replace("only-", "only in ").replace("-", " ").replace("only in a", "only in A").replace("only in b", "only in B"));
    d.appendChild(kv);
    c.sides.forEach(function (side, ri) {
      if (!side) {
        d.appendChild(el("p", { class: "note", text: "not in " + IX.runs[ri].label + " (" + IX.runs[ri].name + ")" }));
        return;
      }
      var line = el("div", { class: "sideline" });
      if (several) line.appendChild(el("b", { text: IX.runs[ri].label + ": " }));
      line.appendChild(el("span", { class: "pill st-" + side.st, text: side.st }));
      var txt = " " + side.c + "/" + side.n + " graded trials passed";
      if (side.n) txt += " · pass rate " + pct(side.c / side.n) + " [" + pct(side.lo) + ", " + pct(side.hi) + "] (Wilson 95%)";
      if (side.err) txt += " · left out of n: " + classes(side.err);
      if (side.ung) txt += " · ungraded " + side.ung;
      if (side.miss) txt += " · missing " + side.miss;
      line.appendChild(document.createTextNode(txt));
      d.appendChild(line);
      (side.warn || []).forEach(function (w) { d.appendChild(el("p", { class: "warn", text: w })); });
      var tabs = el("div", { class: "tabs", role: "tablist" });
      if (several) tabs.appendChild(el("span", { class: "runlab", text: IX.runs[ri].label }));
      side.tr.forEach(function (t) {
        var on = ri === run && t.t === trial;
        tabs.appendChild(el("button", {
          type: "button", class: on ? "on" : null, role: "tab", "aria-selected": on ? "true" : "false",
          "data-run": ri, "data-trial": t.t, title: t.s + (t.x && t.s !== "ungraded" ? " (" + t.x + ")" : ""),
          on: { click: function () { go(c.id, ri, t.t); } }
        }, el("span", { class: "sq " + t.s }), "trial " + t.t));
      });
      d.appendChild(tabs);
    });
    var side = c.sides[run];
    var t = null;
    if (side) side.tr.forEach(function (x) { if (x.t === trial) t = x; });
    if (!t) { d.setAttribute("data-case", c.id); d.setAttribute("data-steps", "0"); return; }
    d.appendChild(renderTrial(c, run, t));
    d.setAttribute("data-case", c.id);
    d.setAttribute("data-run", run);
    d.setAttribute("data-trial", t.t);
  }

  function record(run, ref) {
    if (!ref) return null;
    var key = run + "-" + ref[0];
    if (!(key in chunks)) {
      var node = $("trials-" + key);
      chunks[key] = node ? JSON.parse(node.textContent) : [];
      chunkOrder.push(key);
      if (chunkOrder.length > CACHE_MAX) delete chunks[chunkOrder.shift()];
    }
    return chunks[key][ref[1]] || null;
  }

  function renderTrial(c, run, t) {
    var box = el("div", { class: "trial" });
    var rec = record(run, t.ref);
    // The verdict: from the full record when the page has it (every
    // grader, every check's full evidence), else from the index.
    var vrec = rec || { score: t.g || t.r || (t.ck && t.ck.length) ? { grader: t.g, reasoning: t.r, checks: t.ck, score: t.sc, pass: t.s === "pass", outcome: t["go"] ? { output: t["go"] } : null } : null, error: t.e };
    if (vrec.score && t.e && t.s === "error" && !rec) { vrec.score.error = t.e; vrec.error = null; }
    box.appendChild(HT.verdict({ status: t.s, trial: t.t, score: t.sc }, vrec));
    var kv = HT.kvList();
    kv.row("duration", ms(t.d) + (t.ad != null && t.ad !== t.d ? " (agent " + ms(t.ad) + ")" : ""));
    kv.row("started", iso(t.st));
    kv.row("stop reason", t.stop);
    kv.row("steps", t.n ? t.n + (t.tools ? " (" + t.tools + " tool calls)" : "") : "");
    box.appendChild(kv);
    if (!rec) {
      box.appendChild(el("p", { class: "note", text: IX.runs[run].details ? "no record for this trial" : "this report was written without trajectories" }));
      $("detail").setAttribute("data-steps", "0");
      return box;
    }
    box.appendChild(HT.timingBar(rec));
    box.appendChild(renderRecord(rec, run));
    return box;
  }

  // artifactLinks links a record's artifacts to the files beside the
  // page, when its run's artifacts directory is there (IX.runs[].artifacts).
  function artifactLinks(rec, run) {
    var base = run != null && IX.runs[run] ? IX.runs[run].artifacts : "";
    if (!base || !rec.artifacts || !rec.artifacts.dir) return null;
    var name = String(rec.artifacts.dir).split(/[\\/]/).filter(Boolean).pop() || "";
    if (!name || name === "." || name === "..") return null;
    return { href: function (p) { return base + [name].concat(String(p).split("/")).map(encodeURIComponent).join("/"); } };
  }

  function renderRecord(rec, run) {
    var frag = HT.recordHead(rec, { artifacts: artifactLinks(rec, run) });
    // Format 2 keeps the acp-harness step kinds in trajectory and the rest
    // in events: put them back in one list, in stepId order.
    var steps = HT.sortSteps(rec);
    frag.appendChild(el("h4", { text: "trajectory (" + steps.length + " steps)" }));
    var types = {};
    steps.forEach(function (s) { types[s.type] = (types[s.type] || 0) + 1; });
    var traj = el("div", { class: "traj" });
    var filt = el("div", { class: "steptypes" });
    Object.keys(types).sort().forEach(function (ty) {
      var box = el("input", { type: "checkbox", value: ty });
      box.checked = !state.hidden[ty];
      box.addEventListener("change", function () {
        state.hidden[ty] = !box.checked;
        traj.querySelectorAll(".step." + ty).forEach(function (n) { n.style.display = box.checked ? "" : "none"; });
      });
      filt.appendChild(el("label", null, box, " " + ty + " " + types[ty]));
    });
    if (steps.length) frag.appendChild(filt);
    var inputs = rec.input == null ? [] : Array.isArray(rec.input) ? rec.input : [rec.input];
    var lastTurn = null;
    steps.forEach(function (s) {
      var turn = s.turn || 1;
      if (inputs.length > 1 && turn !== lastTurn && !s.phase) {
        traj.appendChild(el("div", { class: "turnsep", text: "turn " + turn + (inputs[turn - 1] != null ? ": " + inputs[turn - 1].slice(0, 200) : "") }));
        lastTurn = turn;
      }
      var n = HT.step(s);
      if (state.hidden[s.type]) n.style.display = "none";
      HT.placeStep(traj, n, s, null);
    });
    if (!steps.length) traj.appendChild(el("p", { class: "note", text: "no steps" }));
    frag.appendChild(traj);
    $("detail").setAttribute("data-steps", String(steps.length));
    return frag;
  }

  // ---------- start ----------

  setupFilters();
  setupList();
  applyFilters();
  window.addEventListener("hashchange", route);
  document.addEventListener("click", function (ev) {
    var a = ev.target.closest && ev.target.closest("a[data-case]");
    if (!a) return;
    ev.preventDefault();
    go(a.getAttribute("data-case"));
    $("cases").scrollIntoView();
  });
  route();
  document.body.setAttribute("data-ready", "1");
})();
