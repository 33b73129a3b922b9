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
  var state = { statuses: {}, cat: "", chg: "", text: "", shown: [], open: -1, run: 0, trial: 0, hidden: {} };
  STATUSES.forEach(function (s) { state.statuses[s] = true; });
  var byId = {};
  IX.cases.forEach(function (c, i) {
    byId[c.id] = i;
    c.hay = (c.id + "\n" + (c.input || "")).toLowerCase();
  });
  var chunks = {}, chunkOrder = [];

  function $(id) { return document.getElementById(id); }

  // el builds an element: el("div", {class: "x"}, child, "text", ...).
  function el(tag, attrs) {
    var n = document.createElement(tag);
    if (attrs) {
      for (var k in attrs) {
        if (!Object.prototype.hasOwnProperty.call(attrs, k) || attrs[k] == null) continue;
        if (k === "text") n.textContent = attrs[k];
        else if (k === "on") { for (var ev in attrs.on) n.addEventListener(ev, attrs.on[ev]); }
        else n.setAttribute(k, attrs[k]);
      }
    }
    for (var i = 2; i < arguments.length; i++) add(n, arguments[i]);
    return n;
  }
  function add(n, c) {
    if (c == null || c === false) return;
    if (Array.isArray(c)) { c.forEach(function (x) { add(n, x); }); return; }
    n.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
  }

  function pct(x) { return x == null ? "n/a" : (100 * x).toFixed(1) + "%"; }
  function ms(v) {
    if (v == null) return "";
    if (v < 1000) return v + " ms";
    if (v < 60000) return (v / 1000).toFixed(2) + " s";
    return Math.floor(v / 60000) + " min " + Math.round((v % 60000) / 1000) + " s";
  }
  function iso(epoch) { return epoch ? new Date(epoch).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC") : ""; }
  function classes(m) {
    if (!m) return "";
    return Object.keys(m).sort().map(function (k) { return k + " " + m[k]; }).join(", ");
  }
  function errTotal(side) {
    var t = 0;
    if (side && side.err) for (var k in side.err) t += side.err[k];
    return t;
  }
  function json(v) {
    if (typeof v === "string") return v;
    try { return JSON.stringify(v, null, 2); } catch (e) { return String(v); }
  }

  // pre shows long text cut, with a button for the rest.
  function pre(text, cls) {
    text = text == null ? "" : String(text);
    var p = el("pre", { class: cls || null });
    if (text.length <= PRE_MAX) { p.textContent = text; return p; }
    p.textContent = text.slice(0, PRE_MAX);
    var b = el("button", { class: "showall", type: "button", text: "show all (" + text.length + " characters)" });
    b.addEventListener("click", function () { p.textContent = text; b.remove(); });
    return el("div", null, p, b);
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

  function applyFilters() {
    var shown = [];
    for (var i = 0; i < IX.cases.length; i++) if (matches(IX.cases[i])) shown.push(i);
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
      : "64px minmax(90px, 1fr) minmax(40px, 120px) 44px minmax(60px, 200px) 60px";
    var names = compare ? ["A → B", "case", "category", "A trials", "B trials"] : ["status", "case", "category", "c/n", "trials", "errors"];
    if (multi) {
      cols = "minmax(90px, 1fr) minmax(40px, 110px)";
      names = ["case", "category"];
      IX.runs.forEach(function (r) { cols += " minmax(50px, 140px)"; names.push(r.label + " trials"); });
    }
    head.style.setProperty("--cols", cols);
    list.style.setProperty("--cols", cols);
    names.forEach(function (n) { head.appendChild(el("span", { text: n })); });
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
    var v = el("div", { class: "verdict " + t.s });
    var head = "trial " + t.t + ": " + t.s.toUpperCase();
    if (t.sc != null) head += " · score " + (+t.sc).toFixed(2);
    if (t.g) head += " · " + t.g;
    v.appendChild(el("div", { class: "vline", text: head }));
    if (t.r) v.appendChild(el("div", { class: "reason", text: t.r }));
    if (t.ck && t.ck.length) {
      var ul = el("ul", { class: "checks" });
      t.ck.forEach(function (ck) {
        ul.appendChild(el("li", null, el("span", { class: ck.pass ? "ok" : "no", text: ck.pass ? "✓ " : "✗ " }),
          ck.text || "", ck.score != null ? " (" + (+ck.score).toFixed(2) + ")" : "", ck.reason ? el("span", { class: "note", text: " — " + ck.reason }) : null));
      });
      v.appendChild(ul);
    }
    if (t.e) {
      var e = t.e, bits = [e["class"]];
      if (e.code != null) bits.push("code " + e.code);
      if (e.exitCode != null) bits.push("exit " + e.exitCode);
      if (e.signal) bits.push("signal " + e.signal);
      v.appendChild(el("div", { class: "vline", text: "infrastructure error (left out of n): " + bits.join(", ") }));
      if (e.message) v.appendChild(pre(e.message, "err"));
      if (e.stderr) v.appendChild(el("details", null, el("summary", { text: "stderr tail" }), pre(e.stderr, "err")));
    }
    box.appendChild(v);
    var rec = record(run, t.ref);
    var kv = el("dl", { class: "kv" });
    function row(k, val) { if (val != null && val !== "") kv.appendChild(el("dt", { text: k })), kv.appendChild(el("dd", null, val)); }
    row("duration", ms(t.d));
    row("started", iso(t.st));
    row("stop reason", t.stop);
    row("steps", t.n ? t.n + (t.tools ? " (" + t.tools + " tool calls)" : "") : "");
    box.appendChild(kv);
    if (!rec) {
      box.appendChild(el("p", { class: "note", text: IX.runs[run].details ? "no record for this trial" : "this report was written without trajectories" }));
      $("detail").setAttribute("data-steps", "0");
      return box;
    }
    box.appendChild(renderRecord(rec));
    return box;
  }

  function renderRecord(rec) {
    var frag = el("div", { class: "record" });
    var kv = el("dl", { class: "kv" });
    function row(k, val) { if (val != null && val !== "") kv.appendChild(el("dt", { text: k })), kv.appendChild(el("dd", null, val)); }
    var tm = rec.timing || {};
    row("timing", [tm.total != null ? "total " + ms(tm.total) : "", tm.firstResponse != null ? "first response " + ms(tm.firstResponse) : "", tm.sessionCreation != null ? "session " + ms(tm.sessionCreation) : ""].filter(Boolean).join(" · "));
    if (rec.usage) row("usage", JSON.stringify(rec.usage));
    if (rec.toolErrors) row("tool errors", "yes");
    var p = rec.provenance || {};
    row("agent", [p.agentName, p.agentVersion].filter(Boolean).join(" "));
    if (rec.stopReasons && rec.stopReasons.length > 1) row("stop reasons", rec.stopReasons.join(", "));
    frag.appendChild(kv);
    frag.appendChild(el("h4", { text: "output" }));
    frag.appendChild(pre(rec.output || ""));
    if (rec.scores && rec.scores.length > 1) {
      frag.appendChild(el("details", null, el("summary", { text: rec.scores.length + " grader results" }), pre(json(rec.scores))));
    }
    var ws = rec.workspace;
    if (ws && ws.fileChanges && ws.fileChanges.length) {
      var fc = el("details", { open: "" }, el("summary", { text: ws.fileChanges.length + " file change(s) in the workspace" }));
      ws.fileChanges.forEach(function (f) {
        fc.appendChild(el("div", { class: "mono", text: f.status + " " + f.path + (f.binary ? " (binary)" : "") + " · " + f.size + " bytes" }));
        if (f.diff) fc.appendChild(diffPre(f.diff));
      });
      frag.appendChild(fc);
    }
    // What changed inside the repository's .git (a commit's refs, an
    // edited config or hook), apart from the work tree's changes.
    if (ws && ws.gitChanges && ws.gitChanges.length) {
      var gc = el("details", { class: "gitchanges" }, el("summary", { text: ws.gitChanges.length + " change(s) inside .git" }));
      ws.gitChanges.forEach(function (f) {
        gc.appendChild(el("div", { class: "mono", text: f.status + " " + f.path + (f.binary ? " (binary)" : "") + " · " + f.size + " bytes" }));
        if (f.diff) gc.appendChild(diffPre(f.diff));
      });
      frag.appendChild(gc);
    }
    if (rec.agentStderr) frag.appendChild(el("details", null, el("summary", { text: "agent stderr" }), pre(rec.agentStderr, "err")));
    // Format 2 keeps the acp-harness step kinds in trajectory and the rest
    // in events: put them back in one list, in stepId order.
    var steps = (rec.trajectory || []).concat(rec.events || []);
    var seq = function (s) { var m = /-s(\d+)$/.exec(s.stepId || ""); return m ? +m[1] : 1e9; };
    steps.sort(function (a, b) { return seq(a) - seq(b); });
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
      var n = renderStep(s);
      if (state.hidden[s.type]) n.style.display = "none";
      traj.appendChild(n);
    });
    if (!steps.length) traj.appendChild(el("p", { class: "note", text: "no steps" }));
    frag.appendChild(traj);
    $("detail").setAttribute("data-steps", String(steps.length));
    return frag;
  }

  function diffPre(text) {
    var p = el("pre", { class: "diff" });
    String(text).slice(0, PRE_MAX * 4).split("\n").forEach(function (line, i) {
      if (i) p.appendChild(document.createTextNode("\n"));
      var cls = line.charAt(0) === "+" && line.indexOf("+++") !== 0 ? "add" : line.charAt(0) === "-" && line.indexOf("---") !== 0 ? "del" : null;
      p.appendChild(cls ? el("span", { class: cls, text: line }) : document.createTextNode(line));
    });
    return p;
  }

  function tag(text, cls) { return el("span", { class: "tag" + (cls ? " " + cls : ""), text: text }); }

  function section(label, value, open) {
    if (value == null || value === "") return null;
    var text = json(value);
    var d = el("details", null, el("summary", { text: label + " (" + text.length + " chars)" }), pre(text));
    if (open || text.length < 400) d.setAttribute("open", "");
    return d;
  }

  function contentText(blocks) {
    // ToolCallContent array: text parts, diffs and terminals.
    if (!Array.isArray(blocks)) return null;
    var out = [];
    blocks.forEach(function (b) {
      if (!b) return;
      if (b.type === "content" && b.content && b.content.type === "text") out.push(b.content.text);
      else if (b.type === "diff") out.push("diff " + (b.path || "") + "\n--- old\n" + (b.oldText || "") + "\n+++ new\n" + (b.newText || ""));
      else if (b.type === "terminal") out.push("[terminal " + b.terminalId + "]");
      else out.push(json(b));
    });
    return out.join("\n");
  }

  function renderStep(s) {
    var n = el("div", { class: "step " + s.type, "data-step": s.stepId || "" });
    var h = el("div", { class: "sh" }, el("span", { class: "ts", title: "ms since the turn started", text: "+" + ms(s.timestamp || 0) }), el("span", { class: "ty", text: s.type }));
    if (s.turn && s.turn > 1) h.appendChild(tag("turn " + s.turn));
    if (s.phase) h.appendChild(tag(s.phase, "phase"));
    var body = el("div", { class: "body" });
    switch (s.type) {
      case "thought": case "message": case "user_message":
        body.appendChild(el("div", { class: "text", text: typeof s.content === "string" ? s.content : json(s.content) }));
        if (s.blocks && s.blocks.length) body.appendChild(section(s.blocks.length + " non-text block(s)", s.blocks));
        break;
      case "tool_call":
        add(h, [el("span", { text: s.name || s.toolName || s.toolCallId || "" }), s.kind ? tag(s.kind) : null, s.status ? tag(s.status, s.status) : null,
          s.duration != null ? el("span", { class: "ts", text: ms(s.duration) }) : null, el("span", { class: "note", text: s.toolCallId || "" })]);
        add(body, section("input", s.input, true));
        if (s.output != null) add(body, section("output", s.output));
        var ct = contentText(s.content);
        if (ct && json(s.output) !== ct) add(body, section("content", ct));
        if (s.locations && s.locations.length) body.appendChild(el("div", { class: "note mono", text: s.locations.map(function (l) { return l.path + (l.line != null ? ":" + l.line : ""); }).join("  ") }));
        break;
      case "plan":
        var ol = el("ol", { class: "plan" });
        (Array.isArray(s.entries) ? s.entries : []).forEach(function (e) {
          ol.appendChild(el("li", { class: e.status || "" }, e.content || json(e), e.priority ? el("span", { class: "note", text: " · " + e.priority }) : null, e.status ? el("span", { class: "note", text: " · " + e.status }) : null));
        });
        body.appendChild(ol);
        break;
      case "permission":
        var tc = s.toolCall || {};
        add(h, [el("span", { text: tc.title || s.toolCallId || "" }), s.outcome ? tag(s.outcome) : null]);
        var opts = el("div", { class: "opts" });
        (Array.isArray(s.options) ? s.options : []).forEach(function (o, i) {
          if (i) opts.appendChild(document.createTextNode(" · "));
          opts.appendChild(el("span", { class: o.optionId === s.optionId ? "chosen" : null, text: (o.name || o.optionId) + " (" + o.kind + ")" }));
        });
        body.appendChild(opts);
        if (s.optionId) body.appendChild(el("div", { text: "chose " + s.optionId + (s.reason ? " — " + s.reason : "") }));
        else if (s.reason) body.appendChild(el("div", { class: "note", text: s.reason }));
        add(body, section("tool call", s.toolCall));
        break;
      case "fs_read": case "fs_write":
        add(h, [el("span", { class: "mono", text: s.path || "" }), s.bytes != null ? el("span", { class: "note", text: s.bytes + " bytes" }) : null, s.allowed === false ? tag("denied", "denied") : null]);
        if (s.method) body.appendChild(el("div", { class: "note", text: s.method }));
        if (s.error) body.appendChild(pre(s.error, "err"));
        if (s.reason) body.appendChild(el("div", { class: "note", text: s.reason }));
        break;
      case "terminal":
        add(h, [el("span", { class: "mono", text: [s.command].concat(s.args || []).filter(Boolean).join(" ") }), s.method ? tag(s.method) : null, s.allowed === false ? tag("denied", "denied") : null]);
        var info = [];
        if (s.cwd) info.push("cwd " + s.cwd);
        if (s.terminalId) info.push(s.terminalId);
        if (s.exitStatus != null) info.push("exit " + JSON.stringify(s.exitStatus));
        if (s.truncated) info.push("output truncated");
        if (info.length) body.appendChild(el("div", { class: "note mono", text: info.join(" · ") }));
        if (s.text) body.appendChild(pre(s.text));
        if (s.error) body.appendChild(pre(s.error, "err"));
        if (s.reason) body.appendChild(el("div", { class: "note", text: s.reason }));
        break;
      case "event":
        add(h, el("span", { class: "mono", text: s.method || s.update || "" }));
        if (s.error) body.appendChild(el("div", { class: "note", text: s.error }));
        if (s.text) body.appendChild(pre(s.text));
        add(body, section("raw", s.raw));
        break;
      default:
        if (s.update) h.appendChild(el("span", { class: "mono", text: s.update }));
        add(body, section("update", s.raw));
    }
    n.appendChild(h);
    if (body.childNodes.length) n.appendChild(body);
    return n;
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
