// harness view: the runs list, a run's grid, a trial's transcript and the
// comparison of runs, over the server's JSON API. The state of every view
// is in the URL hash, so each view is a link. New records are pushed as
// Server-Sent Events. Agent text is untrusted: it only ever goes in
// through textContent (the renderer of transcript.js does the same).
(function () {
  "use strict";

  var HT = window.HarnessTranscript;
  var el = HT.el, ms = HT.ms, pct = HT.pct, usd = HT.usd;
  var ROW = 28;          // grid row height in px, as in view.css
  var PAGE = 200;        // grid rows fetched at a time
  var STEP_PAGE = 100;   // steps fetched at a time
  var main = document.getElementById("main");
  var view = null;       // the current view: {kind, refresh(), key()}
  var serial = 0;        // bumped at each navigation, to drop stale answers

  function $(sel, root) { return (root || document).querySelector(sel); }

  // ---------- URL state ----------

  function parseHash() {
    var h = location.hash.replace(/^#\/?/, "");
    var i = h.indexOf("?");
    var name = i < 0 ? h : h.slice(0, i);
    var params = new URLSearchParams(i < 0 ? "" : h.slice(i + 1));
    return { name: name || "runs", params: params };
  }
  function link(name, params) {
    var q = params ? params.toString() : "";
    return "#/" + name + (q ? "?" + q : "");
  }
  function setHash(name, params, replace) {
    var h = link(name, params);
    if (location.hash === h) return;
    // The view is not ready until the new one has rendered (the hash
    // changes at once, its view a moment later).
    document.body.removeAttribute("data-ready");
    if (replace) { history.replaceState(null, "", h); route(); } else location.hash = h;
  }

  function api(path, params) {
    var url = "/api/" + path + (params ? "?" + params.toString() : "");
    return fetch(url, { credentials: "same-origin" }).then(function (r) {
      if (!r.ok) return r.text().then(function (t) { throw new Error(r.status + " " + t.trim()); });
      return r.json();
    });
  }

  function crumbs(parts) {
    var nav = document.getElementById("crumbs");
    nav.textContent = "";
    parts.forEach(function (p, i) {
      if (i) nav.appendChild(el("span", { class: "sep", text: "›" }));
      nav.appendChild(p.href ? el("a", { href: p.href, text: p.text }) : el("span", { text: p.text }));
    });
  }

  function fail(err) {
    main.textContent = "";
    main.appendChild(el("p", { class: "warn", text: String(err && err.message || err) }));
  }

  function rate(t) {
    if (!t || t.passRate == null) return "—";
    return pct(t.passRate) + (t.low != null ? " [" + pct(t.low) + ", " + pct(t.high) + "]" : "") + (t.coverage ? " " + t.coverage : "");
  }
  function pill(status, text) { return el("span", { class: "pill st-" + status, text: text || status }); }
  function ago(epoch) {
    var s = Math.max(0, Math.round((Date.now() - epoch) / 1000));
    return s < 60 ? s + " s" : s < 3600 ? Math.floor(s / 60) + " min " + (s % 60) + " s" : Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  }
  function signed(x, digits) { return (x >= 0 ? "+" : "") + x.toFixed(digits == null ? 3 : digits); }

  // ---------- runs ----------

  function runsView() {
    var v = { kind: "runs", selected: {} };
    var my = serial;
    function render(data) {
      if (my !== serial) return;
      crumbs([{ text: "runs" }]);
      main.textContent = "";
      var head = el("div", { class: "bar" }, el("h2", { text: data.runs.length + " run" + (data.runs.length === 1 ? "" : "s") }),
        el("span", { class: "note", text: "under " + data.roots.join(", ") + ", newest first" }));
      var cmp = el("button", { type: "button", id: "compare-selected", class: "act", text: "compare selected" });
      cmp.addEventListener("click", function () {
        var p = new URLSearchParams();
        Object.keys(v.selected).forEach(function (s) { if (v.selected[s]) p.append("src", s); });
        if (p.getAll("src").length >= 2) setHash("compare", p);
      });
      head.appendChild(cmp);
      main.appendChild(head);
      if (!data.runs.length) {
        main.appendChild(el("p", { class: "placeholder", id: "no-runs", text: data.scanned ? "No runs or results files with trials found: a results file shows here once it holds a record (an empty one is left out until then)." : "Searching…" }));
        document.body.setAttribute("data-view", "runs");
        return;
      }
      var t = el("table", { class: "runs", id: "runs" });
      t.appendChild(el("thead", null, el("tr", null, ["", "started", "run", "status", "agent", "pass rate (Wilson 95%)", "trials", "errors", "cost", "progress"].map(function (h) { return el("th", { text: h }); }))));
      var tb = el("tbody");
      data.runs.forEach(function (r) {
        r.sources.forEach(function (s, i) {
          var tr = el("tr", { "data-run": r.id, "data-src": s.src, class: i ? "more" : "first" });
          var box = el("input", { type: "checkbox", "aria-label": "select " + s.src, "data-src": s.src });
          box.checked = !!v.selected[s.src];
          box.addEventListener("change", function () { v.selected[s.src] = box.checked; });
          tr.appendChild(el("td", null, box));
          tr.appendChild(el("td", { class: "mono", text: i ? "" : (r.started || "").replace("T", " ").replace("Z", "") }));
          tr.appendChild(el("td", null, i ? null : el("b", { text: r.suite ? r.suite + " · " + r.name : r.name })));
          tr.appendChild(el("td", null, i ? null : el("span", { class: "status s-" + r.status, text: r.status })));
          var p = new URLSearchParams({ src: s.src });
          tr.appendChild(el("td", null, el("a", { href: link("run", p), class: "srclink", text: s.name }), s.agent && s.agent !== s.name ? el("span", { class: "note", text: " " + s.agent }) : null));
          tr.appendChild(el("td", { class: "num", "data-field": "rate", text: rate(s.totals) }));
          tr.appendChild(el("td", { class: "num", text: s.totals.trials + " (" + s.totals.cases + " cases)" }));
          tr.appendChild(el("td", { class: "num", text: s.totals.errors || "" }));
          tr.appendChild(el("td", { class: "num", text: s.totals.cost != null ? usd(s.totals.cost) : "" }));
          var prog = el("td", { class: "progress" });
          if (s.totals.expected) {
            var frac = Math.min(1, s.totals.trials / s.totals.expected);
            prog.appendChild(el("span", { class: "pbar" }, el("i", { style: "width:" + (100 * frac).toFixed(1) + "%" })));
            prog.appendChild(el("span", { class: "note", text: " " + s.totals.trials + "/" + s.totals.expected }));
          }
          if (!s.totals.trials) prog.appendChild(el("span", { class: "note nothing", text: r.status === "running" ? "no trials written yet" : "no trials in this file" }));
          if (r.status === "running" && s.inProgress && s.inProgress.length) {
            prog.appendChild(el("div", { class: "note", text: s.inProgress.length + " case(s) with trials in: " + s.inProgress.slice(0, 3).map(function (c) { return c.id + " " + c.trials + (c.k ? "/" + c.k : "") + (c.start ? ", first began " + ago(c.start) + " ago" : ""); }).join("; ") }));
          }
          tr.appendChild(prog);
          tb.appendChild(tr);
          (s.problems || []).slice(0, 3).forEach(function (pr) {
            tb.appendChild(el("tr", { class: "problem" }, el("td"), el("td", { colspan: "9", class: "warn", text: pr })));
          });
        });
      });
      t.appendChild(tb);
      main.appendChild(t);
      main.appendChild(el("p", { class: "hint", text: "A running run shows its records as they are written. Units still running are not on disk (a record is written when its unit ends), so the page shows finished trials and, for trials runs, the cases that have some of their trials in." }));
      document.body.setAttribute("data-view", "runs");
    }
    v.refresh = function () { api("runs").then(render, fail); };
    v.onEvent = function (type) { if (type === "runs" || type === "rows" || type === "reset") schedule(v.refresh, 300); };
    v.refresh();
    return v;
  }

  // ---------- a run: the grid ----------

  var COLS = [
    { key: "id", name: "case", w: "minmax(110px, 1.2fr)" },
    { key: "trial", name: "trial", w: "46px", num: true },
    { key: "status", name: "status", w: "70px" },
    { key: "case", name: "case c/n", w: "74px", nosort: true },
    { key: "cat", name: "category", w: "minmax(60px, 0.6fr)" },
    { key: "input", name: "input", w: "minmax(100px, 1.4fr)" },
    { key: "output", name: "output", w: "minmax(100px, 1.6fr)" },
    { key: "score", name: "score", w: "52px", num: true },
    { key: "checks", name: "checks", w: "minmax(80px, 0.8fr)" },
    { key: "error", name: "error", w: "minmax(60px, 0.6fr)" },
    { key: "duration", name: "duration", w: "72px", num: true },
    { key: "tokens", name: "tokens", w: "64px", num: true },
    { key: "cost", name: "cost", w: "62px", num: true },
    { key: "steps", name: "steps", w: "50px", num: true }
  ];
  var FILTER_KEYS = ["st", "changed", "chg", "cat", "dmin", "dmax", "cmin", "cmax", "q", "sort", "desc"];

  // gridQuery is the rows query of a grid's URL parameters.
  function gridQuery(params) {
    var q = new URLSearchParams();
    q.set("src", params.get("src"));
    params.forEach(function (v, k) { if (v !== "" && (FILTER_KEYS.indexOf(k) >= 0 || k.indexOf("meta.") === 0)) q.set(k, v); });
    return q;
  }

  // midCut shortens s to n characters by cutting its middle, so both the
  // start and the end of a long case name (where its number is) show.
  function midCut(s, n) {
    s = String(s);
    if (n < 8 || s.length <= n) return s;
    var head = Math.ceil((n - 1) / 2), tail = n - 1 - head;
    return s.slice(0, head) + "…" + s.slice(s.length - tail);
  }

  function cell(c, r, fit) {
    switch (c.key) {
      case "id": return el("span", { class: "id", title: r.id, "aria-label": r.id, text: midCut(r.id, fit && fit.id) });
      case "trial": return el("span", { class: "num", text: r.trial });
      case "status": return el("span", null, pill(r.status));
      case "case": return el("span", { class: "num", title: "case " + r.caseStatus }, el("span", { class: "dot st-" + r.caseStatus }), " " + r.caseC + "/" + r.caseN);
      case "cat": return el("span", { class: "muted", title: r.cat || "", text: r.cat || "" });
      case "input": return el("span", { class: "txt", title: r.input || "", text: r.input || "" });
      case "output": return el("span", { class: "txt", title: r.output || "", text: r.output || "" });
      case "score": return el("span", { class: "num", text: r.score == null ? "" : (+r.score).toFixed(2) });
      case "checks": return el("span", { class: "txt" + (r.failed ? " bad" : ""), title: r.firstFailed || "", text: r.checks ? (r.failed ? "✗ " + r.failed + "/" + r.checks + (r.firstFailed ? " " + r.firstFailed : "") : "✓ " + r.checks) : "" });
      case "error": return el("span", { class: "txt errc", title: r.errorMessage || "", text: r.error || "" });
      case "duration": return el("span", { class: "num", title: r.agentDuration != null && r.agentDuration !== r.duration ? "agent " + ms(r.agentDuration) + " of the trial's " + ms(r.duration) : "", text: ms(r.duration) });
      case "tokens": return el("span", { class: "num", text: r.tokens || "" });
      case "cost": return el("span", { class: "num", text: r.cost == null ? "" : usd(r.cost) });
      case "steps": return el("span", { class: "num", text: r.steps });
    }
    return el("span");
  }

  function gridView(params, focus) {
    var my = serial;
    var v = { kind: "run", src: params.get("src"), pages: {}, matched: 0, loading: {}, focus: focus };
    var query = gridQuery(params);
    var head, list, rowsBox, count, summary, statusEl, filterBox, filterSig;
    // cur is the position of the row the keys move (j/k, arrows) and open
    // (Enter); fit how many characters of a case name its column shows.
    v.cur = 0;
    var fit = {};

    function paramsWith(k, val) {
      var p = new URLSearchParams(params.toString());
      if (val == null || val === "" || val === false) p.delete(k); else p.set(k, val);
      return p;
    }

    function build(src) {
      // A lone results file is its own run: its name once.
      var lone = src.run.name === src.name;
      crumbs(lone ? [{ text: "runs", href: "#/" }, { text: src.name }] : [{ text: "runs", href: "#/" }, { text: src.run.name, href: link("run", new URLSearchParams({ src: src.src })) }, { text: src.name }]);
      main.textContent = "";
      document.body.setAttribute("data-view", "run");
      var top = el("div", { class: "bar" });
      top.appendChild(el("h2", { id: "run-title" }, lone ? null : src.run.name + " · ", el("span", { class: "srcname", text: src.name })));
      statusEl = el("span", { class: "status s-" + src.run.status, id: "run-status", text: src.run.status });
      top.appendChild(statusEl);
      summary = el("span", { class: "summary", id: "summary" });
      top.appendChild(summary);
      main.appendChild(top);
      var others = src.others.filter(function (o) { return o.id === src.run.id; });
      if (others.length) {
        var tabs = el("div", { class: "srctabs" }, el("span", { class: "note", text: "agents: " }), el("b", { text: src.name }));
        others.forEach(function (o) { tabs.appendChild(el("a", { href: link("run", new URLSearchParams({ src: o.src })), text: o.name.split(" · ").pop() })); });
        var cp = new URLSearchParams();
        cp.append("src", src.src);
        others.forEach(function (o) { cp.append("src", o.src); });
        tabs.appendChild(el("a", { class: "act", href: link("compare", cp), text: "compare the agents" }));
        main.appendChild(tabs);
      }
      (src.problems || []).forEach(function (p) { main.appendChild(el("p", { class: "warn", text: p })); });
      if (!src.totals.trials) main.appendChild(el("p", { class: "note", id: "no-trials", text: src.run.status === "running" ? "No trials written yet: they show here as the run writes them." : "This file holds no trials." }));
      filterBox = filters(src);
      filterSig = filterSignature(src);
      main.appendChild(filterBox);
      var grid = el("div", { class: "grid" });
      var cols = COLS.map(function (c) { return c.w; }).join(" ");
      head = el("div", { class: "ghead", id: "grid-head", style: "--cols:" + cols });
      COLS.forEach(function (c) {
        if (c.nosort) { head.appendChild(el("span", { text: c.name })); return; }
        var on = params.get("sort") === c.key, desc = params.get("desc") === "1";
        head.appendChild(el("button", { type: "button", class: "sorth" + (on ? " on" : "") + (on && desc ? " desc" : ""), "data-sort": c.key, text: c.name, on: { click: function () {
          var p = paramsWith("sort", c.key);
          if (on) { if (desc) p.delete("desc"); else p.set("desc", "1"); } else if (c.num) p.set("desc", "1"); else p.delete("desc");
          setHash("run", p);
        } } }));
      });
      list = el("div", { class: "glist", id: "grid", tabindex: "0", style: "--cols:" + cols });
      rowsBox = el("div", { class: "grows", id: "grid-rows" });
      list.appendChild(rowsBox);
      grid.appendChild(head);
      grid.appendChild(list);
      main.appendChild(grid);
      if (v.focus) {
        var f = document.getElementById(v.focus);
        if (f) { f.focus(); if (f.type === "search") { var n = f.value.length; f.setSelectionRange(n, n); } }
      }
      var pending = false;
      list.addEventListener("scroll", function () {
        if (pending) return;
        pending = true;
        requestAnimationFrame(function () { pending = false; renderRows(); });
      });
      rowsBox.addEventListener("click", function (ev) {
        var row = ev.target.closest(".grow");
        if (!row) return;
        openRow(row);
      });
      // Tab reaches the current row; a focused row is the current one.
      rowsBox.addEventListener("focusin", function (ev) {
        var row = ev.target.closest(".grow");
        if (row) v.cur = +row.getAttribute("data-pos");
      });
      // How many characters of a case name its column shows (monospace).
      var idHead = head.firstChild;
      var probe = el("span", { class: "id", style: "position:absolute;visibility:hidden", text: "0000000000" });
      rowsBox.appendChild(probe);
      var cw = probe.getBoundingClientRect().width / 10 || 7.5;
      probe.remove();
      fit.id = Math.floor((idHead.getBoundingClientRect().width || 110) / cw);
    }

    function filters(src) {
      var f = el("div", { class: "filters", id: "filters" });
      var st = (params.get("st") || "").split(",").filter(Boolean);
      f.appendChild(el("span", { class: "flabel", text: "show" }));
      [["fail", "failed"], ["flaky", "flaky"], ["error", "errors"], ["pass", "passed"], ["ungraded", "ungraded"]].forEach(function (s) {
        var box = el("input", { type: "checkbox", name: "st", value: s[0] });
        box.checked = st.indexOf(s[0]) >= 0;
        box.addEventListener("change", function () {
          var cur = st.filter(function (x) { return x !== s[0]; });
          if (box.checked) cur.push(s[0]);
          setHash("run", paramsWith("st", cur.join(",")), true);
        });
        f.appendChild(el("label", { class: "fchip st-" + s[0] }, box, " " + s[1]));
      });
      function select(id, label, opts, key) {
        var sel = el("select", { id: id, "aria-label": label });
        opts.forEach(function (o) { var op = el("option", { value: o[0], text: o[1] }); if (params.get(key) === o[0]) op.selected = true; sel.appendChild(op); });
        sel.addEventListener("change", function () { setHash("run", paramsWith(key, sel.value), true); });
        f.appendChild(el("span", { class: "flabel", text: label }));
        f.appendChild(sel);
        return sel;
      }
      select("f-changed", "changed against", [["", "—"]].concat(src.others.map(function (o) { return [o.src, o.name]; })), "changed");
      if (params.get("changed")) select("f-chg", "change", [["", "gained or lost"], ["gained", "gained"], ["lost", "lost"], ["same", "same"], ["no-verdict", "no verdict"], ["only-here", "only here"]], "chg");
      if (src.categories.length) select("f-cat", "category", [["", "all"]].concat(src.categories.map(function (c) { return [c, c]; })), "cat");
      var keys = Object.keys(src.meta).filter(function (k) { return k !== "category"; }).sort();
      if (keys.length) {
        var mk = "", mv = "";
        params.forEach(function (val, k) { if (k.indexOf("meta.") === 0) { mk = k.slice(5); mv = val; } });
        var keySel = el("select", { id: "f-metakey", "aria-label": "metadata key" }, el("option", { value: "", text: "—" }));
        keys.forEach(function (k) { var o = el("option", { value: k, text: k }); if (k === mk) o.selected = true; keySel.appendChild(o); });
        var valSel = el("select", { id: "f-metaval", "aria-label": "metadata value" }, el("option", { value: "", text: "any" }));
        (src.meta[mk] || []).forEach(function (x) { var o = el("option", { value: x, text: x }); if (x === mv) o.selected = true; valSel.appendChild(o); });
        var apply = function () {
          var p = new URLSearchParams(params.toString());
          Array.from(p.keys()).forEach(function (k) { if (k.indexOf("meta.") === 0) p.delete(k); });
          if (keySel.value) p.set("meta." + keySel.value, keySel.value === mk ? valSel.value : "");
          setHash("run", p, true);
        };
        keySel.addEventListener("change", apply);
        valSel.addEventListener("change", apply);
        f.appendChild(el("span", { class: "flabel", text: "metadata" }));
        f.appendChild(keySel);
        if (mk) f.appendChild(valSel);
      }
      function range(label, lo, hi, unit) {
        f.appendChild(el("span", { class: "flabel", text: label }));
        [lo, hi].forEach(function (k, i) {
          var inp = el("input", { type: "number", min: "0", step: "any", id: "f-" + k, class: "num", placeholder: i ? "max" : "min", "aria-label": label + (i ? " max" : " min") + " (" + unit + ")", value: params.get(k) || null });
          inp.addEventListener("change", function () { setHash("run", paramsWith(k, inp.value), true); });
          f.appendChild(inp);
        });
      }
      range("duration ms", "dmin", "dmax", "ms");
      range("cost $", "cmin", "cmax", "USD");
      var txt = el("input", { type: "search", id: "f-text", placeholder: "search input and output", "aria-label": "search", value: params.get("q") || null });
      var timer = 0;
      txt.addEventListener("input", function () {
        clearTimeout(timer);
        timer = setTimeout(function () { setHash("run", paramsWith("q", txt.value.trim()), true); }, 200);
      });
      f.appendChild(txt);
      count = el("span", { class: "shown", id: "shown-count" });
      f.appendChild(count);
      return f;
    }

    function fetchPage(n) {
      if (v.loading[n]) return;
      v.loading[n] = true;
      var q = new URLSearchParams(query.toString());
      q.set("offset", n * PAGE);
      q.set("limit", PAGE);
      var gen = v.gen;
      api("rows", q).then(function (page) {
        v.loading[n] = false;
        if (my !== serial || gen !== v.gen) return;
        v.pages[n] = page.rows;
        setMatched(page.matched, page.total);
        renderRows();
      }, function (err) { v.loading[n] = false; fail(err); });
    }

    function setMatched(m, total) {
      v.matched = m;
      rowsBox.style.height = m * ROW + "px";
      count.textContent = m + " of " + total + " trials";
      rowsBox.setAttribute("data-matched", m);
    }

    function renderRows() {
      var h = list.clientHeight || 600;
      var first = Math.max(0, Math.floor(list.scrollTop / ROW) - 10);
      var last = Math.min(v.matched, Math.ceil((list.scrollTop + h) / ROW) + 10);
      var frag = document.createDocumentFragment();
      for (var i = first; i < last; i++) {
        var pg = Math.floor(i / PAGE), rows = v.pages[pg];
        if (!rows) { fetchPage(pg); continue; }
        var r = rows[i - pg * PAGE];
        if (!r) continue;
        var row = el("div", { class: "grow st-row-" + r.status + (i === v.cur ? " cur" : ""), "data-id": r.id, "data-trial": r.trial, "data-pos": i, role: "button",
          tabindex: i === v.cur ? "0" : "-1", "aria-label": "case " + r.id + " trial " + r.trial + ": " + r.status, style: "top:" + i * ROW + "px" });
        COLS.forEach(function (c) { row.appendChild(cell(c, r, fit)); });
        frag.appendChild(row);
      }
      var refocus = document.activeElement && rowsBox.contains(document.activeElement);
      rowsBox.textContent = "";
      rowsBox.appendChild(frag);
      if (refocus || v.wantFocus) {
        var c = rowsBox.querySelector('.grow[data-pos="' + v.cur + '"]');
        if (c) { c.focus({ preventScroll: true }); v.wantFocus = false; }
      }
      document.body.setAttribute("data-ready", "1");
    }

    // moveTo makes the row at position i the current one, scrolled into
    // view and focused.
    function moveTo(i) {
      if (!v.matched) return;
      v.cur = Math.max(0, Math.min(v.matched - 1, i));
      var top = v.cur * ROW;
      if (top < list.scrollTop) list.scrollTop = top;
      else if (top + ROW > list.scrollTop + list.clientHeight) list.scrollTop = top + ROW - list.clientHeight;
      v.wantFocus = true;
      renderRows();
    }

    function openRow(row) {
      var p = new URLSearchParams(params.toString());
      p.set("id", row.getAttribute("data-id"));
      p.set("trial", row.getAttribute("data-trial"));
      setHash("trial", p);
    }

    // filterSignature is what the filter bar offers: rebuilt when a live
    // run's new trials bring categories, metadata or runs to compare.
    function filterSignature(src) {
      return JSON.stringify([src.categories, src.meta, src.others.map(function (o) { return o.src; })]);
    }

    function loadSummary(src) {
      var t = src.totals;
      // A live run's status and filters follow it.
      statusEl.textContent = src.run.status;
      statusEl.className = "status s-" + src.run.status;
      var sig = filterSignature(src);
      if (sig !== filterSig && filterBox && filterBox.parentNode) {
        var had = document.activeElement && filterBox.contains(document.activeElement) ? document.activeElement.id : null;
        var fresh = filters(src);
        filterBox.parentNode.replaceChild(fresh, filterBox);
        filterBox = fresh;
        filterSig = sig;
        if (had && document.getElementById(had)) document.getElementById(had).focus();
      }
      summary.textContent = "";
      summary.appendChild(el("span", null, "pass rate ", el("b", { "data-field": "pass-rate", text: rate(t) }), t.low != null ? el("span", { class: "note", text: " (Wilson 95% over graded trials)" }) : null));
      summary.appendChild(el("span", { id: "summary-counts", text: t.trials + (t.expected ? " of " + t.expected : "") + " trials · " + t.cases + (t.expectedCases ? " of " + t.expectedCases : "") + " cases · " + t.graded + " graded · " + t.errors + " errors" + (t.cost != null ? " · " + usd(t.cost) : "") }));
      if (src.run.status === "running" && src.inProgress && src.inProgress.length) {
        summary.appendChild(el("span", { class: "note", text: "in progress: " + src.inProgress.map(function (c) { return c.id + " (" + c.trials + (c.k ? "/" + c.k : "") + " trials" + (c.start ? ", " + ago(c.start) : "") + ")"; }).slice(0, 5).join(", ") }));
      }
    }

    v.gen = 0;
    v.refresh = function () {
      // The head and the rows in view load side by side.
      var srcLoad = api("source", new URLSearchParams({ src: v.src }));
      if (head) v.refreshRows();
      srcLoad.then(function (src) {
        if (my !== serial) return;
        if (!head) {
          build(src);
          v.gen++;
          fetchPage(0);
        }
        loadSummary(src);
      }, fail);
    };
    // refreshRows fetches the rows in view again; refreshHead the counts.
    v.refreshRows = function () {
      if (!head || my !== serial) return;
      v.gen++;
      v.pages = {};
      v.loading = {};
      fetchPage(Math.floor(Math.max(0, list.scrollTop / ROW - 10) / PAGE));
    };
    v.refreshHead = function () {
      if (!head || my !== serial) return;
      api("source", new URLSearchParams({ src: v.src })).then(function (src) { if (my === serial) loadSummary(src); }, fail);
    };
    v.onEvent = function (type, data) {
      // A run's status (running, finished) changes with its run.json and
      // its files, not its rows.
      if (type === "runs") { schedule(v.refreshHead, 300); return; }
      if (data && data.src && data.src !== v.src && data.src !== params.get("changed")) return;
      // New rows show at once; the counts above follow.
      schedule(v.refreshRows, 30);
      schedule(v.refreshHead, 500);
    };
    v.keys = function (ev) {
      var k = ev.key;
      if (k === "/") { ev.preventDefault(); $("#f-text").focus(); return; }
      var inGrid = document.activeElement && list && list.contains(document.activeElement);
      if (k === "j" || (k === "ArrowDown" && inGrid)) { ev.preventDefault(); moveTo(v.cur + 1); }
      else if (k === "k" || (k === "ArrowUp" && inGrid)) { ev.preventDefault(); moveTo(v.cur - 1); }
      else if (k === "Enter" && inGrid) {
        var row = rowsBox.querySelector('.grow[data-pos="' + v.cur + '"]');
        if (row) { ev.preventDefault(); openRow(row); }
      }
    };
    v.refresh();
    return v;
  }

  // ---------- a trial ----------

  function trialView(params) {
    var my = serial;
    var v = { kind: "trial" };
    var src = params.get("src"), id = params.get("id"), trial = +params.get("trial");
    var nav = { prev: null, next: null, prevCase: null, nextCase: null };

    function go(r) {
      if (!r) return;
      var p = new URLSearchParams(params.toString());
      p.set("id", r.id);
      p.set("trial", r.trial);
      setHash("trial", p);
    }

    function neighbours() {
      var q = gridQuery(params);
      q.set("find", id);
      q.set("ftrial", trial);
      return api("rows", q).then(function (page) {
        if (page.at < 0) return;
        var i = page.at - page.offset, rows = page.rows;
        nav.prev = rows[i - 1] || null;
        nav.next = rows[i + 1] || null;
        for (var j = i + 1; j < rows.length; j++) if (rows[j].id !== id) { nav.nextCase = rows[j]; break; }
        for (var k = i - 1; k >= 0; k--) if (rows[k].id !== id) {
          // The first trial of the case before.
          var c = rows[k].id, m = k;
          while (m > 0 && rows[m - 1].id === c) m--;
          nav.prevCase = rows[m];
          break;
        }
      });
    }

    function render(d) {
      if (my !== serial) return;
      var rec = d.record;
      var grid = new URLSearchParams(params.toString());
      grid.delete("id");
      grid.delete("trial");
      crumbs([{ text: "runs", href: "#/" }, { text: d.src, href: link("run", grid) }, { text: id }, { text: "trial " + trial }]);
      main.textContent = "";
      document.body.setAttribute("data-view", "trial");
      var top = el("div", { class: "bar" });
      top.appendChild(el("h2", { class: "caseid", text: id }));
      top.appendChild(pill(d.row.caseStatus, "case " + d.row.caseStatus + " " + d.row.caseC + "/" + d.row.caseN));
      var tabs = el("span", { class: "tabs", role: "tablist" });
      (d.trials || []).forEach(function (t) {
        var on = t.trial === trial;
        var b = el("button", { type: "button", class: on ? "on" : null, role: "tab", "aria-selected": on ? "true" : "false", "data-trial": t.trial, title: t.status },
          el("span", { class: "sq " + t.status }), "trial " + t.trial);
        b.addEventListener("click", function () { go({ id: id, trial: t.trial }); });
        tabs.appendChild(b);
      });
      top.appendChild(tabs);
      var navBox = el("span", { class: "navkeys" });
      [["k", "‹ prev", "prev"], ["j", "next ›", "next"], ["p", "« case", "prevCase"], ["n", "case »", "nextCase"]].forEach(function (b) {
        var btn = el("button", { type: "button", class: "navb", id: "nav-" + b[2], title: "key " + b[0], text: b[1] });
        btn.addEventListener("click", function () { go(nav[b[2]]); });
        navBox.appendChild(btn);
      });
      navBox.appendChild(el("span", { class: "note", text: "j/k trials · n/p cases · Esc back" }));
      top.appendChild(navBox);
      main.appendChild(top);
      var detail = el("div", { class: "trialview", id: "detail", "data-case": id, "data-trial": trial });
      var kv = HT.kvList();
      kv.row("input", rec.input == null ? "" : Array.isArray(rec.input) ? rec.input.join("\n— next turn —\n") : String(rec.input));
      kv.row("expected", rec.expected);
      kv.row("category", d.row.cat);
      if (d.row.meta) kv.row("metadata", Object.keys(d.row.meta).sort().map(function (k) { return k + "=" + d.row.meta[k]; }).join("  "));
      detail.appendChild(kv);
      detail.appendChild(HT.verdict({ status: d.row.status, trial: trial, score: d.row.score }, rec));
      detail.appendChild(HT.timingBar(rec));
      // The trial's artifacts link to the files the viewer serves.
      detail.appendChild(HT.recordHead(rec, { artifacts: { files: d.artifactFiles || [], href: function (p) {
        return "/api/artifact?" + new URLSearchParams({ src: src, id: id, trial: trial, path: p }).toString();
      } } }));
      detail.appendChild(el("h4", { text: "trajectory (" + d.steps + " steps)" }));
      var traj = el("div", { class: "traj", id: "traj" });
      detail.appendChild(traj);
      main.appendChild(detail);
      stepPager(traj, src, id, trial, d.steps, rec, detail);
    }

    api("trial", new URLSearchParams({ src: src, id: id, trial: trial })).then(render, fail);
    neighbours().then(function () { if (my === serial) document.body.setAttribute("data-nav", "1"); }, function () {});
    v.keys = function (ev) {
      var k = ev.key;
      if (k === "j") go(nav.next);
      else if (k === "k") go(nav.prev);
      else if (k === "n" || k === "J") go(nav.nextCase);
      else if (k === "p" || k === "K") go(nav.prevCase);
      else if (k === "Escape") { var g = new URLSearchParams(params.toString()); g.delete("id"); g.delete("trial"); setHash("run", g); }
    };
    v.onEvent = function () {};
    return v;
  }

  // stepPager loads a trajectory's steps a page at a time as the reader
  // scrolls to its end. mark, when set, is the index of a step to mark.
  function stepPager(box, src, id, trial, total, rec, detail, mark) {
    var loaded = 0, busy = false;
    var inputs = rec.input == null ? [] : Array.isArray(rec.input) ? rec.input : [rec.input];
    var lastTurn = null;
    var more = el("button", { type: "button", class: "more-steps", text: "load more steps" });
    function load(upTo) {
      if (busy || loaded >= total) return Promise.resolve();
      busy = true;
      var limit = Math.max(STEP_PAGE, (upTo || 0) - loaded + 20);
      return api("steps", new URLSearchParams({ src: src, id: id, trial: trial, from: loaded, limit: Math.min(limit, 1000) })).then(function (page) {
        busy = false;
        page.steps.forEach(function (s, i) {
          var turn = s.turn || 1;
          if (inputs.length > 1 && turn !== lastTurn && !s.phase) {
            box.insertBefore(el("div", { class: "turnsep", text: "turn " + turn + (inputs[turn - 1] != null ? ": " + String(inputs[turn - 1]).slice(0, 200) : "") }), more);
            lastTurn = turn;
          }
          var n = HT.step(s);
          if (mark != null && loaded + i === mark) n.classList.add("diffmark");
          HT.placeStep(box, n, s, more);
        });
        loaded += page.steps.length;
        if (detail) detail.setAttribute("data-steps", loaded);
        if (loaded >= total) more.remove(); else more.textContent = "load more steps (" + loaded + " of " + total + ")";
        if (upTo != null && loaded <= upTo) return load(upTo);
      }, function (err) { busy = false; box.appendChild(el("p", { class: "warn", text: String(err.message) })); });
    }
    box.appendChild(more);
    if (!total) { more.remove(); box.appendChild(el("p", { class: "note", text: "no steps" })); if (detail) detail.setAttribute("data-steps", "0"); }
    more.addEventListener("click", function () { load(); });
    if ("IntersectionObserver" in window) {
      new IntersectionObserver(function (es) { if (es.some(function (e) { return e.isIntersecting; })) load(); }).observe(more);
    }
    return load(mark).then(function () {
      if (mark != null && mark >= 0) {
        var m = box.querySelector(".diffmark");
        if (m) m.scrollIntoView({ block: "center" });
      }
    });
  }

  // ---------- compare ----------

  function compareView(params) {
    var my = serial;
    var v = { kind: "compare" };
    var srcs = params.getAll("src");
    var q = new URLSearchParams();
    srcs.forEach(function (s) { q.append("src", s); });
    q.set("k", params.get("k") || "1");

    // d3 is a difference with its interval, or says there is none: when
    // every case changed by the same amount the paired bootstrap has no
    // spread.
    function d3(d, asPct, digits) {
      if (!d) return "n/a";
      var f = asPct ? function (x) { return signed(100 * x, 1) + " pts"; } : function (x) { return signed(x, digits || 2); };
      if (d.none || (d.resamples >= 1 && d.low === d.high)) return f(d.diff) + " (no interval: every case changed by the same amount)";
      return f(d.diff) + " [" + f(d.low) + ", " + f(d.high) + "]";
    }
    function ci(r) {
      if (r.method === "none") return "no interval (every case alike)";
      return "[" + pct(r.low) + ", " + pct(r.high) + "]" + (r.method === "exact" ? " exact" : "");
    }

    function render(c) {
      if (my !== serial) return;
      crumbs([{ text: "runs", href: "#/" }, { text: "compare " + c.sources.length + " runs" }]);
      main.textContent = "";
      document.body.setAttribute("data-view", "compare");
      var names = {};
      c.sources.forEach(function (s, i) { names[s.src] = String.fromCharCode(65 + i); });
      var top = el("div", { class: "bar" }, el("h2", { text: "Compare" }));
      var ksel = el("select", { id: "cmp-k", "aria-label": "k" });
      [1, 2, 3, 5, 10].forEach(function (k) { var o = el("option", { value: k, text: "pass@" + k }); if (String(k) === q.get("k")) o.selected = true; ksel.appendChild(o); });
      ksel.addEventListener("change", function () { var p = new URLSearchParams(params.toString()); p.set("k", ksel.value); setHash("compare", p); });
      top.appendChild(el("span", { class: "flabel", text: "difference of mean" }));
      top.appendChild(ksel);
      main.appendChild(top);
      var t = el("table", { class: "num cmp", id: "cmp-sources" });
      t.appendChild(el("tr", null, ["", "run · agent", "cases", "trials", "pass rate (Wilson 95%)", "errors", "cost"].map(function (h) { return el("th", { text: h }); })));
      c.sources.forEach(function (s) {
        t.appendChild(el("tr", null, el("td", null, el("b", { text: names[s.src] })), el("td", null, el("a", { href: link("run", new URLSearchParams({ src: s.src })), text: s.run + " · " + s.name })),
          el("td", { text: s.totals.cases }), el("td", { text: s.totals.trials }), el("td", { text: rate(s.totals) }), el("td", { text: s.totals.errors }), el("td", { text: s.totals.cost != null ? usd(s.totals.cost) : "" })));
      });
      main.appendChild(t);
      var rs = c.against.length ? c.against[0].report.passRate : null;
      main.appendChild(el("p", { class: "note", id: "cmp-methods", text: "Intervals (95%): a run's pass rate, Wilson over its graded trials; differences, paired bootstrap over the common cases" +
        (rs ? " (" + rs.resamples + " resamples, seed " + rs.seed + ")" : "") + "; the ranking, bootstrap over cases, exact (Clopper–Pearson) where every case has the same verdict; McNemar and Fisher, exact tests." }));
      if (c.ranking) {
        main.appendChild(el("h3", { text: "Ranking on the " + c.ranking.cases + " cases graded in every run" }));
        var rk = el("table", { class: "num cmp", id: "cmp-ranking" });
        rk.appendChild(el("tr", null, ["rank", "run", "mean pass rate", "95% interval"].map(function (h) { return el("th", { text: h }); })));
        c.ranking.runs.slice().sort(function (a, b) { return a.rank - b.rank; }).forEach(function (r) {
          rk.appendChild(el("tr", null, el("td", { text: r.rank }), el("td", { text: names[r.file] }), el("td", { text: pct(r.meanPassRate) }), el("td", { text: ci(r) })));
        });
        main.appendChild(rk);
        var pr = el("table", { class: "num cmp", id: "cmp-pairs" });
        pr.appendChild(el("tr", null, ["pair", "only first passes", "only second passes", "McNemar p", "p (Holm)", ""].map(function (h) { return el("th", { text: h }); })));
        c.ranking.pairs.forEach(function (p) {
          pr.appendChild(el("tr", null, el("td", { text: names[p.a] + " vs " + names[p.b] }), el("td", { text: p.onlyA }), el("td", { text: p.onlyB }), el("td", { text: p.pValue.toPrecision(3) }), el("td", { text: p.pHolm.toPrecision(3) }), el("td", { text: p.significant ? "significant at " + c.ranking.alpha : "" })));
        });
        main.appendChild(pr);
      }
      c.against.forEach(function (vs) {
        var A = names[vs.a], B = names[vs.b], r = vs.report, m = r.mcnemar;
        var sec = el("section", { class: "versus", "data-b": vs.b });
        sec.appendChild(el("h3", { text: B + " against " + A + " on " + r.commonCases + " common cases (" + m.cases + " comparable)" }));
        var kv = HT.kvList();
        kv.row("McNemar (" + m.method + ")", "both pass " + m.bothPass + ", only " + A + " " + m.onlyA + ", only " + B + " " + m.onlyB + ", both fail " + m.bothFail + "; p = " + m.pValue.toPrecision(3));
        if (r.passRate) kv.row("mean pass rate " + B + "−" + A, d3(r.passRate, true) + " (paired bootstrap, " + r.passRate.cases + " cases)");
        if (r.passAtK && r.passAtK.k > 1) kv.row("mean pass@" + r.passAtK.k + " " + B + "−" + A, d3(r.passAtK, true));
        kv.row("cost per case " + B + "−" + A, vs.cost ? d3(vs.cost, false, 4) + " USD (" + usd(vs.cost.a) + " → " + usd(vs.cost.b) + ")" : "n/a");
        kv.row("mean trial time " + B + "−" + A, vs.time ? signed(vs.time.diff, 0) + " ms [" + signed(vs.time.low, 0) + ", " + signed(vs.time.high, 0) + "] (" + ms(vs.time.a) + " → " + ms(vs.time.b) + ")" : "n/a");
        (r.warnings || []).forEach(function (w) { kv.row("note", w); });
        sec.appendChild(kv);
        if (vs.curves && vs.curves.length) {
          var ct = el("table", { class: "num cmp curves" });
          ct.appendChild(el("tr", null, ["k", "Δ pass@k [95%]", "Δ pass^k [95%]", "cases"].map(function (h) { return el("th", { text: h }); })));
          vs.curves.forEach(function (cv) { ct.appendChild(el("tr", null, el("td", { text: cv.k }), el("td", { text: d3(cv.at, true) }), el("td", { text: d3(cv.exp, true) }), el("td", { text: cv.at ? cv.at.cases : "" }))); });
          sec.appendChild(ct);
        }
        sec.appendChild(el("h4", { text: vs.flips.length + " case(s) flipped, most evident first (Fisher's exact test on the case's trials)" }));
        var ft = el("table", { class: "num cmp flips" });
        ft.appendChild(el("tr", null, ["case", "change", A + " c/n", B + " c/n", "Δ pass rate", "p", ""].map(function (h) { return el("th", { text: h }); })));
        vs.flips.forEach(function (f) {
          var p = new URLSearchParams();
          p.append("src", vs.a); p.append("src", vs.b); p.set("case", f.id);
          ft.appendChild(el("tr", { class: "flip " + f.change, "data-case": f.id }, el("td", { class: "id", text: f.id }), el("td", null, el("span", { class: "chg chg-" + f.change, text: f.change })),
            el("td", { text: f.cA + "/" + f.nA }), el("td", { text: f.cB + "/" + f.nB }), el("td", { text: signed(100 * f.delta, 0) + " pts" }), el("td", { text: f.p.toPrecision(3) }),
            el("td", null, el("a", { href: link("side", p), class: "sidelink", text: "side by side" }))));
        });
        sec.appendChild(ft);
        main.appendChild(sec);
      });
      document.body.setAttribute("data-ready", "1");
    }
    v.refresh = function () { api("compare", q).then(render, fail); };
    v.onEvent = function (type, data) { if (data && data.src && srcs.indexOf(data.src) >= 0) schedule(v.refresh, 500); };
    v.refresh();
    return v;
  }

  // side shows one case's trajectories in two runs side by side, the first
  // step where they differ marked.
  function sideView(params) {
    var my = serial;
    var v = { kind: "side", onEvent: function () {} };
    var srcs = params.getAll("src").slice(0, 2), id = params.get("case");
    crumbs([{ text: "runs", href: "#/" }, { text: "compare", href: link("compare", new URLSearchParams(srcs.map(function (s) { return ["src", s]; }))) }, { text: id }]);
    main.textContent = "";
    document.body.setAttribute("data-view", "side");
    var info = el("p", { class: "note", id: "side-first" });
    var cols = el("div", { class: "side" });
    main.appendChild(el("div", { class: "bar" }, el("h2", { class: "caseid", text: id }), info));
    main.appendChild(cols);
    // Each side's trial: as the URL says, else its first failing one (the
    // one that explains a loss), else the first.
    Promise.all(srcs.map(function (s, i) {
      var want = params.get("t" + i);
      return api("trial", new URLSearchParams({ src: s, id: id, trial: want || 1 })).then(function (d) {
        if (want) return d;
        var pick = null;
        (d.trials || []).forEach(function (t) { if (!pick && (t.status === "fail" || t.status === "error")) pick = t.trial; });
        return pick && pick !== 1 ? api("trial", new URLSearchParams({ src: s, id: id, trial: pick })) : d;
      }).catch(function (err) { return { error: err }; });
    })).then(function (ds) {
      if (my !== serial) return;
      if (ds.some(function (d) { return d.error; })) { fail(ds.filter(function (d) { return d.error; })[0].error); return; }
      var dq = new URLSearchParams({ "a.src": srcs[0], "a.id": id, "a.trial": ds[0].row.trial, "b.src": srcs[1], "b.id": id, "b.trial": ds[1].row.trial });
      return api("diff", dq).then(function (diff) {
        if (my !== serial) return;
        info.textContent = diff.first < 0 ? "the two trajectories are the same step for step (" + diff.a + " steps)" : "first difference at step " + (diff.first + 1) + " (of " + diff.a + " and " + diff.b + ")";
        info.setAttribute("data-first", diff.first);
        // The timing bars share one scale: the longer trial's.
        var scale = Math.max.apply(null, ds.map(function (d) { return HT.timingTotal(d.record); }));
        ds.forEach(function (d, i) {
          var rec = d.record;
          var col = el("div", { class: "sidecol", "data-src": d.src });
          col.appendChild(el("h3", { text: String.fromCharCode(65 + i) + ": " + d.src + " · trial " + d.row.trial }));
          col.appendChild(HT.verdict({ status: d.row.status, trial: d.row.trial, score: d.row.score }, rec));
          col.appendChild(HT.timingBar(rec, scale));
          col.appendChild(HT.changes(rec));
          var traj = el("div", { class: "traj" });
          col.appendChild(traj);
          cols.appendChild(col);
          stepPager(traj, d.src, id, d.row.trial, d.steps, rec, col, diff.first < 0 ? null : diff.first);
        });
        document.body.setAttribute("data-ready", "1");
      });
    }).catch(fail);
    return v;
  }

  // ---------- routing, live updates ----------

  // schedule runs fn after delay, once however often it is asked meanwhile.
  function schedule(fn, delay) {
    if (fn.pending) return;
    fn.pending = setTimeout(function () { fn.pending = 0; fn(); }, delay);
  }

  function route() {
    serial++;
    var h = parseHash();
    document.body.removeAttribute("data-ready");
    document.body.removeAttribute("data-nav");
    switch (h.name) {
      case "run": view = gridView(h.params, document.activeElement && document.activeElement.id); break;
      case "trial": view = trialView(h.params); break;
      case "compare": view = compareView(h.params); break;
      case "side": view = sideView(h.params); break;
      default: view = runsView();
    }
  }

  function live() {
    var badge = document.getElementById("live");
    if (!window.EventSource) { badge.textContent = "not live (no EventSource)"; return; }
    var es = new EventSource("/api/events");
    es.addEventListener("open", function () { badge.textContent = "live"; badge.className = "live on"; });
    es.addEventListener("error", function () { badge.textContent = "reconnecting…"; badge.className = "live off"; });
    ["rows", "reset", "runs"].forEach(function (type) {
      es.addEventListener(type, function (ev) {
        var data = null;
        try { data = JSON.parse(ev.data); } catch (e) { data = null; }
        document.body.setAttribute("data-last-event", ev.lastEventId);
        if (view && view.onEvent) view.onEvent(type, data);
      });
    });
    es.addEventListener("reload", function () { if (view && view.refresh) view.refresh(); });
  }

  document.addEventListener("keydown", function (ev) {
    if (ev.target && /^(INPUT|SELECT|TEXTAREA)$/.test(ev.target.tagName)) return;
    if (ev.metaKey || ev.ctrlKey || ev.altKey) return;
    if (view && view.keys) view.keys(ev);
  });
  window.addEventListener("hashchange", route);
  route();
  live();
})();
