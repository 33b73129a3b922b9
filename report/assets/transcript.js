// The transcript renderer shared by harness report (inlined into its one
// file) and harness view (served as /assets/transcript.js): a trial's
// verdict with each grader's reasoning and every check's evidence, its
// timing bar, its record (output, usage, file changes, stderr) and its
// steps. Agent text is untrusted: every string goes in through
// textContent or a text node, never as HTML.
(function (global) {
  "use strict";

  var PRE_MAX = 6000;      // characters shown before "show all"

  // el builds an element: el("div", {class: "x"}, child, "text", ...).
  function el(tag, attrs) {
    var n = document.createElement(tag);
    if (attrs) {
      for (var k in attrs) {
        if (!Object.prototype.hasOwnProperty.call(attrs, k) || attrs[k] == null) continue;
        if (k === "text") n.textContent = attrs[k];
        else if (k === "style") setStyle(n, attrs[k]);
        else if (k === "on") { for (var ev in attrs.on) n.addEventListener(ev, attrs.on[ev]); }
        else n.setAttribute(k, attrs[k]);
      }
    }
    for (var i = 2; i < arguments.length; i++) add(n, arguments[i]);
    return n;
  }
  // setStyle sets inline styles through the CSSOM ("top:3px;--x:1"), which
  // a Content-Security-Policy without 'unsafe-inline' allows, unlike a
  // style attribute.
  function setStyle(n, css) {
    String(css).split(";").forEach(function (decl) {
      var i = decl.indexOf(":");
      if (i > 0) n.style.setProperty(decl.slice(0, i).trim(), decl.slice(i + 1).trim());
    });
  }
  function add(n, c) {
    if (c == null || c === false) return;
    if (Array.isArray(c)) { c.forEach(function (x) { add(n, x); }); return; }
    n.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
  }

  function pct(x) { return x == null ? "n/a" : (100 * x).toFixed(1) + "%"; }
  function ms(v) {
    if (v == null) return "";
    if (v < 1000) return Math.round(v) + " ms";
    if (v < 60000) return (v / 1000).toFixed(2) + " s";
    return Math.floor(v / 60000) + " min " + Math.round((v % 60000) / 1000) + " s";
  }
  // usd writes dollars as every harness output does ($0.0154): four
  // decimals, the cost of one trial being often under a cent.
  function usd(v) { return v == null ? "" : "$" + v.toFixed(4); }
  function iso(epoch) { return epoch ? new Date(epoch).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC") : ""; }
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

  function kvList() {
    var kv = el("dl", { class: "kv" });
    kv.row = function (k, val) { if (val != null && val !== "") kv.appendChild(el("dt", { text: k })), kv.appendChild(el("dd", null, val)); };
    return kv;
  }

  // checksList shows a grader's checks; a failed check shows its evidence
  // (the failing test's message, the command's output).
  function checksList(checks) {
    var ul = el("ul", { class: "checks" });
    (checks || []).forEach(function (ck) {
      var li = el("li", { class: ck.pass ? "check ok-check" : "check failed-check" },
        el("span", { class: ck.pass ? "ok" : "no", text: ck.pass ? "✓ " : "✗ " }),
        el("span", { class: "cktext", text: ck.text || "" }),
        ck.score != null ? " (" + (+ck.score).toFixed(2) + ")" : "",
        ck.reason ? el("span", { class: "note", text: " — " + ck.reason }) : null);
      if (ck.evidence != null && ck.evidence !== "") {
        var ev = pre(json(ck.evidence), "evidence");
        if (ck.pass) li.appendChild(el("details", null, el("summary", { text: "evidence" }), ev));
        else li.appendChild(ev);
      }
      ul.appendChild(li);
    });
    return ul;
  }

  function errorBlock(e, label) {
    var box = el("div", { class: "errblock" });
    var bits = [e["class"] || "error"];
    if (e.code != null) bits.push("code " + e.code);
    if (e.exitCode != null) bits.push("exit " + e.exitCode);
    if (e.signal) bits.push("signal " + e.signal);
    box.appendChild(el("div", { class: "vline", text: (label || "infrastructure error (left out of n)") + ": " + bits.join(", ") }));
    if (e.message) box.appendChild(pre(e.message, "err"));
    if (e.stderr) box.appendChild(el("details", null, el("summary", { text: "stderr tail" }), pre(e.stderr, "err")));
    return box;
  }

  var TAIL_LINES = 40;   // lines of a command's output shown before "show all"

  // outputBlock shows the output of a grader's command (a verifier's
  // test.sh), folded: the failing tests pytest's summary names first, then
  // the output's tail, the whole of it a click away.
  function outputBlock(g) {
    var text = String(g.outcome.output).replace(/\s+$/, "");
    if (!text) return null;
    var lines = text.split("\n");
    var failing = lines.filter(function (l) { return /^(FAILED|ERROR) \S/.test(l); });
    var label = (g.grader === "harbor-verifier" ? "verifier output" : "grader output") + " (" + lines.length + " line" + (lines.length === 1 ? "" : "s");
    if (g.outcome.exitCode != null) label += ", exit " + g.outcome.exitCode;
    if (failing.length) label += ", " + failing.length + " failing test" + (failing.length === 1 ? "" : "s");
    var d = el("details", { class: "gout" }, el("summary", { text: label + ")" }));
    if (failing.length) {
      d.appendChild(el("div", { class: "note", text: "failing tests" }));
      d.appendChild(el("pre", { class: "gfail err", text: failing.join("\n") }));
    }
    var cut = lines.length > TAIL_LINES;
    if (failing.length || cut) d.appendChild(el("div", { class: "note", text: cut ? "last " + TAIL_LINES + " of " + lines.length + " lines" : "output" }));
    var p = el("pre", { class: "gtail", text: (cut ? lines.slice(-TAIL_LINES) : lines).join("\n") });
    d.appendChild(p);
    if (cut) {
      var b = el("button", { class: "showall", type: "button", text: "show all " + lines.length + " lines" });
      b.addEventListener("click", function () { p.textContent = text; b.remove(); });
      d.appendChild(b);
    }
    return d;
  }

  // graderBlock shows one grader's result: verdict, score, reasoning,
  // checks with evidence, the output of its command (folded), or its
  // error.
  function graderBlock(g) {
    var ok = g.error ? "error" : g.pass ? "pass" : "fail";
    var box = el("div", { class: "grader " + ok });
    var head = (g.grader || "grader") + ": " + (g.error ? "ERROR" : g.pass ? "PASS" : "FAIL");
    if (!g.error && g.score != null) head += " · score " + (+g.score).toFixed(2);
    if (g.durationMs) head += " · " + ms(g.durationMs);
    box.appendChild(el("div", { class: "gline", text: head }));
    if (g.reasoning) box.appendChild(el("div", { class: "reason", text: g.reasoning }));
    if (g.checks && g.checks.length) box.appendChild(checksList(g.checks));
    if (g.outcome && typeof g.outcome.output === "string") add(box, outputBlock(g));
    if (g.error) box.appendChild(errorBlock(g.error, "grader error"));
    return box;
  }

  // verdict shows a trial's verdict: status line, then each grader's
  // result (scores, when several graders ran, else score), then the
  // record's infrastructure error. t: {status, trial, score}; rec: the
  // capture record (may lack its steps).
  function verdict(t, rec) {
    var v = el("div", { class: "verdict " + t.status });
    var head = "trial " + t.trial + ": " + String(t.status).toUpperCase();
    if (t.score != null) head += " · score " + (+t.score).toFixed(2);
    v.appendChild(el("div", { class: "vline", text: head }));
    var graders = !rec ? [] : rec.scores && rec.scores.length ? rec.scores : rec.score ? [rec.score] : rec.graderError ? [rec.graderError] : [];
    graders.forEach(function (g) { v.appendChild(graderBlock(g)); });
    if (rec && rec.error) v.appendChild(errorBlock(rec.error));
    return v;
  }

  // timingSegments are where a trial's time went: the session's creation,
  // the wait for the first response, the rest of the turns, and grading,
  // as [class, label, ms].
  function timingSegments(rec) {
    var tm = rec.timing || {};
    var total = tm.total || Math.max(0, (tm.end || 0) - (tm.start || 0));
    var grading = 0;
    (rec.scores && rec.scores.length ? rec.scores : rec.score ? [rec.score] : []).forEach(function (g) { grading += g.durationMs || 0; });
    var segs = [];
    var setup = tm.sessionCreation || 0;
    var first = tm.firstResponse != null ? tm.firstResponse : 0;
    var turns = Math.max(0, total - setup);
    if (setup) segs.push(["setup", "session", setup]);
    if (first && first <= turns) { segs.push(["first", "first response", first]); turns -= first; }
    if (turns) segs.push(["turns", "turns", turns]);
    // A trial's own time after its agent's: a task's verification and
    // the graders in its slot; else the graders' own times.
    if (tm.trial && tm.trial > total) segs.push(["grading", "verification and grading", tm.trial - total]);
    else if (grading) segs.push(["grading", "grading", grading]);
    return segs;
  }

  // timingTotal is the length of a trial's timing bar, in ms.
  function timingTotal(rec) {
    return timingSegments(rec).reduce(function (a, s) { return a + s[2]; }, 0);
  }

  // timingBar draws where a trial's time went. With scale (ms), bars of
  // several trials share it: the bar is as long as its trial against
  // scale, so a 14 s trial and a 2 s one look their lengths.
  function timingBar(rec, scale) {
    var segs = timingSegments(rec);
    var sum = segs.reduce(function (a, s) { return a + s[2]; }, 0);
    var box = el("div", { class: "timing" });
    if (!sum) return box;
    var bar = el("div", { class: "tbar", role: "img", "aria-label": "timing" });
    if (scale > 0) {
      box.classList.add("scaled");
      setStyle(bar, "width:" + Math.max(1, 100 * Math.min(1, sum / scale)).toFixed(2) + "%");
      bar.setAttribute("data-scale", scale);
    }
    var legend = el("div", { class: "tlegend" });
    segs.forEach(function (s) {
      bar.appendChild(el("span", { class: "tseg " + s[0], style: "flex-grow:" + Math.max(s[2] / sum, 0.01), title: s[1] + " " + ms(s[2]) }));
      legend.appendChild(el("span", { class: "tkey " + s[0] }, el("i"), s[1] + " " + ms(s[2])));
    });
    box.appendChild(bar);
    var calls = rec.modelCalls || [];
    var tm = rec.timing || {};
    if (calls.length && tm.start) {
      // The model calls of the ledger on the same time axis, a lane under
      // the bar: each call from its start for its duration.
      var lane = el("div", { class: "tcalls", role: "img", "aria-label": "model calls" });
      if (scale > 0) setStyle(lane, "width:" + Math.max(1, 100 * Math.min(1, sum / scale)).toFixed(2) + "%");
      calls.forEach(function (c) {
        var left = Math.max(0, Math.min(1, (c.start - tm.start) / sum));
        var width = Math.max((c.duration || 0) / sum, 0.004);
        lane.appendChild(el("span", { class: "tcall" + (c.error ? " err" : ""),
          style: "left:" + (100 * left).toFixed(2) + "%;width:" + (100 * Math.min(width, 1 - left)).toFixed(2) + "%",
          title: callTitle(c) }));
      });
      box.appendChild(lane);
      legend.appendChild(el("span", { class: "tkey calls" }, el("i"), calls.length + " model call" + (calls.length === 1 ? "" : "s")));
    }
    if (scale > 0) legend.appendChild(el("span", { class: "note", text: "· total " + ms(sum) + " of " + ms(scale) + " (one scale for the trials side by side)" }));
    box.appendChild(legend);
    return box;
  }

  // callTitle words one model call of the ledger.
  function callTitle(c) {
    var parts = [c.model || c.provider + " " + c.api, "turn " + (c.turn || "-"), "status " + c.status];
    if (c.firstToken != null) parts.push("first token " + ms(c.firstToken));
    parts.push(ms(c.duration || 0));
    parts.push((c.inputTokens || 0) + " in / " + (c.cachedTokens || 0) + " cached / " + (c.outputTokens || 0) + " out");
    parts.push(c.usd != null ? usd(c.usd) : "cost unknown");
    if (c.retry) parts.push("retry " + c.retry);
    if (c.error) parts.push(c.error.kind + ": " + c.error.message);
    return parts.join(" · ");
  }

  // callSums sums a ledger's calls by turn: [{turn, calls, failed, in,
  // cached, write, out, usd (null when a call with tokens has no price)}],
  // in turn order, then the whole ledger as turn "all".
  function callSums(calls) {
    var by = {}, order = [];
    function add(key, c) {
      var s = by[key];
      if (!s) { s = by[key] = { turn: key, calls: 0, failed: 0, in: 0, cached: 0, write: 0, out: 0, usd: 0 }; order.push(key); }
      s.calls++;
      if (c.error) s.failed++;
      s.in += c.inputTokens || 0; s.cached += c.cachedTokens || 0; s.write += c.cacheWriteTokens || 0; s.out += c.outputTokens || 0;
      var tokens = (c.inputTokens || 0) + (c.cachedTokens || 0) + (c.cacheWriteTokens || 0) + (c.outputTokens || 0);
      if (c.usd != null && s.usd != null) s.usd += c.usd;
      else if (c.usd == null && tokens > 0) s.usd = null;
    }
    calls.forEach(function (c) { add(c.turn || 0, c); });
    order.sort(function (a, b) { return a - b; });
    var out = order.map(function (k) { return by[k]; });
    calls.forEach(function (c) { add("all", c); });
    out.push(by.all);
    return out;
  }

  function callSumText(s) {
    return s.calls + " call" + (s.calls === 1 ? "" : "s") + (s.failed ? " (" + s.failed + " failed)" : "") + " · " +
      s.in + " in / " + s.cached + " cached / " + s.write + " cache write / " + s.out + " out tokens · " +
      (s.usd != null ? usd(s.usd) : "cost unknown");
  }

  var OUTSIDE_SHOWN = 500; // paths listed before "show all"

  // changes shows what a trial changed: the workspace's files with their
  // diffs, what changed inside .git (folded) and, in an image, the paths
  // outside the working directory (folded, with their count by status).
  function changes(rec) {
    var frag = el("div", { class: "changes" });
    var ws = rec.workspace;
    if (ws && ws.fileChanges && ws.fileChanges.length) {
      var fc = el("details", { open: "", class: "filechanges" }, el("summary", { text: ws.fileChanges.length + " file change(s) in the workspace" }));
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
    if (ws && ws.outsideChanges && ws.outsideChanges.length) {
      var by = {};
      ws.outsideChanges.forEach(function (c) { by[c.status] = (by[c.status] || 0) + 1; });
      var n = ws.outsideChanges.length;
      var oc = el("details", { class: "outsidechanges" }, el("summary", { text: n + " path" + (n === 1 ? "" : "s") + " changed outside the working directory (" +
        Object.keys(by).sort().map(function (k) { return by[k] + " " + k; }).join(", ") + ")" }));
      var list = el("pre", { class: "mono outside" });
      var show = function (upTo) { list.textContent = ws.outsideChanges.slice(0, upTo).map(function (c) { return c.status + " " + c.path; }).join("\n"); };
      show(OUTSIDE_SHOWN);
      oc.appendChild(list);
      if (n > OUTSIDE_SHOWN) {
        var b = el("button", { class: "showall", type: "button", text: "show all " + n + " paths" });
        b.addEventListener("click", function () { show(n); b.remove(); });
        oc.appendChild(b);
      }
      frag.appendChild(oc);
    }
    return frag;
  }

  // taskStepsTable shows a multi-step task's steps: each one's reward,
  // min_reward, whether it counts, its timing, its error and why the trial
  // ended there.
  function taskStepsTable(steps) {
    var t = el("table", { class: "tasksteps" });
    t.appendChild(el("tr", null, ["step", "reward", "min reward", "counts", "setup", "agent", "verifier", "error", "ended the trial"].map(function (h) { return el("th", { text: h }); })));
    steps.forEach(function (s) {
      var tm = s.timing || {};
      var min = s.minReward ? Object.keys(s.minReward).sort().map(function (k) { return (k === "reward" ? "" : k + " ") + s.minReward[k]; }).join(", ") : "";
      var err = s.error ? [s.error["class"] || "error", s.error.message].filter(Boolean).join(": ") : s.verdict && s.verdict.error ? "verifier: " + (s.verdict.error.message || s.verdict.error["class"] || "error") : "";
      var tr = el("tr", { class: "taskstep" + (s.endedTrial ? " ended" : "") + (s.error ? " failed" : "") },
        el("td", { class: "name", text: s.name || "" }),
        el("td", { class: "reward", text: s.reward != null ? (+s.reward).toFixed(2) : "—" }),
        el("td", { class: "min", text: min }),
        el("td", { class: "counts", text: s.contributesToReward ? "yes" : "no" }),
        el("td", { class: "setup", text: tm.setup ? ms(tm.setup) : "" }),
        el("td", { class: "agent", text: tm.agent != null ? ms(tm.agent) : "" }),
        el("td", { class: "verifier", text: tm.verifier ? ms(tm.verifier) : "" }),
        el("td", { class: "error", text: err }),
        el("td", { class: "ended", text: s.endedTrial || "" }));
      t.appendChild(tr);
    });
    return t;
  }

  // artifactsList shows a trial's artifacts: the directory they were
  // copied to, each path copied, and each one missing with why. With
  // links.href (a path relative to the trial's artifacts directory to a
  // URL), each path copied is a link: with links.files (the files the
  // viewer serves), a file is linked and a directory lists its files,
  // each linked; without, every path is.
  function artifactsList(a, links) {
    var box = el("div", { class: "artifacts" });
    box.appendChild(el("div", { class: "adir", text: "in " + (a.dir || "") }));
    var ul = el("ul", { class: "apaths" });
    function link(p, text) { return el("a", { class: "alink", href: links.href(p), target: "_blank", rel: "noopener", text: text }); }
    (a.paths || []).forEach(function (p) {
      var li = el("li", { class: "apath" });
      if (!links || !links.href) li.textContent = p;
      else if (!links.files || links.files.indexOf(p) >= 0) li.appendChild(link(p, p));
      else {
        li.appendChild(document.createTextNode(p));
        var inner = links.files.filter(function (f) { return f.indexOf(p + "/") === 0; });
        if (inner.length) {
          var sub = el("ul", { class: "afiles" });
          inner.forEach(function (f) { sub.appendChild(el("li", { class: "afile" }, link(f, f.slice(p.length + 1)))); });
          li.appendChild(sub);
        }
      }
      ul.appendChild(li);
    });
    (a.missing || []).forEach(function (m) { ul.appendChild(el("li", { class: "amissing", text: "missing: " + m })); });
    box.appendChild(ul);
    return box;
  }

  // recordHead shows a record's facts before its steps: timing, usage,
  // agent, task steps, artifacts, output, file changes and stderr.
  // opts.artifacts, when given, links the artifacts (see artifactsList).
  function recordHead(rec, opts) {
    var frag = el("div", { class: "record" });
    var kv = kvList();
    var tm = rec.timing || {};
    kv.row("timing", [tm.trial ? "trial " + ms(tm.trial) : "", tm.total != null ? (tm.trial ? "agent " : "total ") + ms(tm.total) : "", tm.firstResponse != null ? "first response " + ms(tm.firstResponse) : "", tm.sessionCreation != null ? "session " + ms(tm.sessionCreation) : "", tm.waited ? "waited " + ms(tm.waited) + " on the provider" : ""].filter(Boolean).join(" · "));
    kv.row("started", iso(tm.start));
    if (rec.usage) kv.row("usage", JSON.stringify(rec.usage));
    if (rec.cost) kv.row("cost", [rec.cost.usd != null ? usd(rec.cost.usd) : "", (rec.cost.inputTokens || 0) + " in / " + (rec.cost.outputTokens || 0) + " out tokens"].filter(Boolean).join(" · "));
    if (rec.modelCalls && rec.modelCalls.length) {
      var sums = callSums(rec.modelCalls);
      kv.row("model calls", callSumText(sums[sums.length - 1]));
      if (sums.length > 2) sums.slice(0, -1).forEach(function (s) { kv.row("turn " + (s.turn || "-"), callSumText(s)); });
      if (rec.agentUsage) kv.row("agent's usage", JSON.stringify(rec.agentUsage));
    }
    if (rec.toolErrors) kv.row("tool errors", "yes");
    var p = rec.provenance || {};
    kv.row("agent", [p.agentName, p.agentVersion].filter(Boolean).join(" "));
    kv.row("stop reason", rec.stopReason);
    if (rec.stopReasons && rec.stopReasons.length > 1) kv.row("stop reasons", rec.stopReasons.join(", "));
    frag.appendChild(kv);
    if (rec.taskSteps && rec.taskSteps.length) {
      frag.appendChild(el("h4", { text: "task steps (" + rec.taskSteps.length + ")" }));
      frag.appendChild(taskStepsTable(rec.taskSteps));
    }
    if (rec.artifacts) {
      var na = (rec.artifacts.paths || []).length, nm = (rec.artifacts.missing || []).length;
      frag.appendChild(el("h4", { text: "artifacts (" + na + " copied" + (nm ? ", " + nm + " missing" : "") + ")" }));
      frag.appendChild(artifactsList(rec.artifacts, opts && opts.artifacts));
    }
    frag.appendChild(el("h4", { text: "output" }));
    frag.appendChild(pre(rec.output || ""));
    frag.appendChild(changes(rec));
    if (rec.agentStderr) frag.appendChild(el("details", null, el("summary", { text: "agent stderr" }), pre(rec.agentStderr, "err")));
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

  // sortSteps puts the steps of a record (format 2 keeps some in
  // "events") back in one list, in stepId order.
  function sortSteps(rec) {
    var steps = (rec.trajectory || []).concat(rec.events || []);
    var seq = function (s) { var m = /-s(\d+)$/.exec(s.stepId || ""); return m ? +m[1] : 1e9; };
    steps.sort(function (a, b) { return seq(a) - seq(b); });
    return steps;
  }

  // toolCallOf is the tool call a step belongs to (a tool call's own id,
  // the one a permission request gated), "" for none.
  function toolCallOf(s) {
    return s.toolCallId || (s.toolCall && s.toolCall.toolCallId) || "";
  }

  // placeStep adds a step's node to box before `end` (null: at the end);
  // a permission request goes before the tool call it gated, which the
  // agent announced first, so the request reads before what it allowed.
  function placeStep(box, n, s, end) {
    var id = s.type === "permission" ? toolCallOf(s) : "";
    if (id) {
      var calls = box.querySelectorAll(".step.tool_call");
      for (var i = 0; i < calls.length; i++) {
        if (calls[i].getAttribute("data-tcid") === id) { box.insertBefore(n, calls[i]); return; }
      }
    }
    box.insertBefore(n, end || null);
  }

  // step renders one trajectory step. Thoughts are folded.
  function step(s) {
    var n = el("div", { class: "step " + s.type, "data-step": s.stepId || "", "data-tcid": toolCallOf(s) || null });
    var h = el("div", { class: "sh" }, el("span", { class: "ts", title: "ms since the turn started", text: "+" + ms(s.timestamp || 0) }), el("span", { class: "ty", text: s.type }));
    if (s.turn && s.turn > 1) h.appendChild(tag("turn " + s.turn));
    if (s.phase) h.appendChild(tag(s.phase, "phase"));
    var body = el("div", { class: "body" });
    switch (s.type) {
      case "thought":
        var th = typeof s.content === "string" ? s.content : json(s.content);
        body.appendChild(el("details", { class: "fold" }, el("summary", { text: th.slice(0, 120).replace(/\s+/g, " ") + (th.length > 120 ? "…" : "") }), el("div", { class: "text", text: th })));
        break;
      case "message": case "user_message":
        body.appendChild(el("div", { class: "text", text: typeof s.content === "string" ? s.content : json(s.content) }));
        if (s.blocks && s.blocks.length) body.appendChild(section(s.blocks.length + " non-text block(s)", s.blocks));
        break;
      case "tool_call":
        add(h, [el("span", { class: "tname", text: s.name || s.toolName || s.toolCallId || "" }), s.kind ? tag(s.kind) : null, s.status ? tag(s.status, s.status) : null,
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
        if (s.text) body.appendChild(pre(s.text, "term"));
        if (s.error) body.appendChild(pre(s.error, "err"));
        if (s.reason) body.appendChild(el("div", { class: "note", text: s.reason }));
        break;
      case "network":
        add(h, [el("span", { class: "mono", text: (s.host || "") + (s.port ? ":" + s.port : "") }), s.allowed === false ? tag("denied", "denied") : tag("allowed"), s.open ? tag("open") : null]);
        var net = [];
        if (s.bytesOut != null) net.push(s.bytesOut + " bytes out");
        if (s.bytesIn != null) net.push(s.bytesIn + " bytes in");
        if (s.duration != null) net.push(ms(s.duration));
        if (net.length) body.appendChild(el("div", { class: "note mono", text: net.join(" · ") }));
        if (s.error) body.appendChild(el("div", { class: "note", text: s.error }));
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

  global.HarnessTranscript = {
    el: el, add: add, pre: pre, pct: pct, ms: ms, usd: usd, iso: iso, json: json, kvList: kvList,
    checksList: checksList, outputBlock: outputBlock, graderBlock: graderBlock, errorBlock: errorBlock, verdict: verdict,
    timingBar: timingBar, timingTotal: timingTotal, placeStep: placeStep, changes: changes, recordHead: recordHead, diffPre: diffPre, sortSteps: sortSteps, step: step
  };
})(this);
