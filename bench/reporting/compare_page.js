// The A/B page of `bench compare --html` (bench/reporting/compare_page.py): a virtual list of every
// query (only the visible rows are in the document), filters, sort, search, keyboard navigation
// (j/k or the arrow keys) and a permalink per query (#q=<query_id>); the selected query's detail
// is drawn on demand from the embedded JSON.
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("data").textContent);
  var X = JSON.parse(document.getElementById("detail").textContent);
  var ROW = 26, N = D.ids.length, EQ = "recall@budget", RK = "recall@" + D.k;
  var byId = {};
  for (var i = 0; i < N; i++) byId[D.ids[i]] = i;
  var colOf = {};
  D.measures.forEach(function (m) { colOf[m.name] = m.column; });
  var lower = D.ids.map(function (id) { var q = X.queries[id]; return (id + " " + (q ? q.question : "")).toLowerCase(); });
  var shown = [], sel = -1;

  function esc(s) {
    return String(s == null ? "" : s).replace(/[&<>"']/g, function (c) {
      return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c];
    });
  }
  function num(v, d) { return v == null ? "—" : v.toFixed(d == null ? 3 : d); }
  function val(col, side, i) { var c = D.values[col]; return c ? c[side][i] : null; }
  function el(tag, attrs, html) {
    var e = document.createElement(tag);
    for (var a in attrs) e.setAttribute(a, attrs[a]);
    if (html != null) e.innerHTML = html;
    return e;
  }

  var app = document.getElementById("app");
  var mods = "<option value=''>every modality</option>" + D.modalities.map(function (m, j) {
    return "<option value='" + j + "'>" + esc(m) + "</option>";
  }).join("");
  var oc = "<option value=''>any</option><option value=win>win</option><option value=loss>loss</option><option value=tie>tie</option>" +
    "<option value=none>not counted</option>";
  app.appendChild(el("div", {"class": "controls"},
    "<label>modality <select id=f-mod>" + mods + "</select></label>" +
    "<label>queries <select id=f-ans><option value=''>all</option><option value='a'>answerable</option><option value='u'>unanswerable</option></select></label>" +
    "<label>" + esc(EQ) + " <select id=f-eq>" + oc + "</select></label>" +
    "<label>" + esc(RK) + " <select id=f-rk>" + oc + "</select></label>" +
    "<label>sort <select id=f-sort><option value=id>query id</option><option value=deq>Δ " + esc(EQ) + " (B worst first)</option>" +
    "<option value=drk>Δ " + esc(RK) + " (B worst first)</option><option value=mod>modality</option></select></label>" +
    "<input type=search id=f-text placeholder='search query id or question'>" +
    "<span id=count class=muted></span><span class=muted>keys: <span class=kbd>j</span>/<span class=kbd>k</span> or " +
    "<span class=kbd>↓</span>/<span class=kbd>↑</span> next / previous</span>"));
  var layout = el("div", {"class": "layout"});
  var left = el("div");
  left.appendChild(el("div", {"class": "lhead"}, "<span>query</span><span>modality</span><span title='abstained: hands over nothing'>abstained</span><span>" + esc(EQ) +
    "</span><span>" + esc(RK) + "</span>"));
  var list = el("div", {"class": "list", id: "list", tabindex: "0"});
  var spacer = el("div");
  list.appendChild(spacer);
  left.appendChild(list);
  var pane = el("div", {"class": "pane", id: "pane"}, "<p class=empty>Select a query.</p>");
  layout.appendChild(left);
  layout.appendChild(pane);
  app.appendChild(layout);

  function delta(col, i) {
    var a = val(col, 0, i), b = val(col, 1, i);
    return a == null || b == null ? Infinity : b - a;
  }
  function outcomeOk(name, want, i) {
    if (!want) return true;
    var o = D.outcome[name][i];
    return want === "none" ? o === "" : o === want;
  }
  function apply() {
    var mod = document.getElementById("f-mod").value, ans = document.getElementById("f-ans").value;
    var eq = document.getElementById("f-eq").value, rk = document.getElementById("f-rk").value;
    var text = document.getElementById("f-text").value.trim().toLowerCase(), sort = document.getElementById("f-sort").value;
    var keep = [];
    for (var i = 0; i < N; i++) {
      if (mod !== "" && D.modality[i] !== +mod) continue;
      if (ans === "a" && D.unanswerable[i]) continue;
      if (ans === "u" && !D.unanswerable[i]) continue;
      if (!outcomeOk(EQ, eq, i) || !outcomeOk(RK, rk, i)) continue;
      if (text && lower[i].indexOf(text) < 0) continue;
      keep.push(i);
    }
    if (sort === "deq" || sort === "drk") {
      var col = colOf[sort === "deq" ? EQ : RK];
      keep.sort(function (x, y) { return (delta(col, x) - delta(col, y)) || (x - y); });
    } else if (sort === "mod") {
      keep.sort(function (x, y) { return (D.modality[x] - D.modality[y]) || (x - y); });
    }
    shown = keep;
    document.getElementById("count").textContent = shown.length + " of " + N + " queries";
    spacer.style.height = (shown.length * ROW) + "px";
    draw();
  }
  function cellOf(name, i) {
    var o = D.outcome[name][i], col = colOf[name];
    return "<span class='o-" + (o || "none") + "' title='A " + num(val(col, 0, i)) + ", B " + num(val(col, 1, i)) + "'>" +
      (o || "—") + "</span>";
  }
  function abstMark(i) {
    var a = D.abstained[i];
    return "<span class=abst title='abstained: hands over nothing'>" + (a[0] && a[1] ? "A, B" : a[0] ? "A" : a[1] ? "B" : "") + "</span>";
  }
  function draw() {
    var top = list.scrollTop, h = list.clientHeight || 600;
    var first = Math.max(0, Math.floor(top / ROW) - 5), last = Math.min(shown.length, Math.ceil((top + h) / ROW) + 5);
    var rows = list.querySelectorAll(".row");
    for (var r = 0; r < rows.length; r++) rows[r].remove();
    var frag = document.createDocumentFragment();
    for (var p = first; p < last; p++) {
      var i = shown[p];
      var row = el("div", {"class": "row" + (i === sel ? " sel" : ""), "data-i": i, "data-id": D.ids[i]},
        "<span title='" + esc(D.ids[i]) + "'>" + esc(D.ids[i]) + (D.unanswerable[i] ? " <i class=muted>unanswerable</i>" : "") +
        "</span><span>" + esc(D.modalities[D.modality[i]]) + "</span>" + abstMark(i) + cellOf(EQ, i) + cellOf(RK, i));
      row.style.top = (p * ROW) + "px";
      frag.appendChild(row);
    }
    list.appendChild(frag);
  }
  list.addEventListener("scroll", draw);
  list.addEventListener("click", function (ev) {
    var row = ev.target.closest(".row");
    if (row) go(+row.getAttribute("data-i"));
  });
  ["f-mod", "f-ans", "f-eq", "f-rk", "f-sort"].forEach(function (id) { document.getElementById(id).addEventListener("change", apply); });
  document.getElementById("f-text").addEventListener("input", apply);

  function go(i, by) {
    by = by || 0;
    sel = i;
    var id = D.ids[i];
    if (decodeURIComponent(location.hash.slice(3)) !== id) history.replaceState(null, "", "#q=" + encodeURIComponent(id));
    var p = shown.indexOf(i);
    if (p >= 0) {
      if (p * ROW < list.scrollTop || (p + 1) * ROW > list.scrollTop + list.clientHeight) {
        list.scrollTop = Math.max(0, p * ROW - (by === 0 ? list.clientHeight / 2 : by > 0 ? list.clientHeight - ROW : 0));
      }
    }
    draw();
    detail(i);
  }
  function step(by) {
    if (!shown.length) return;
    var p = shown.indexOf(sel);
    p = p < 0 ? 0 : Math.min(shown.length - 1, Math.max(0, p + by));
    go(shown[p], by);
  }
  document.addEventListener("keydown", function (ev) {
    var t = ev.target.tagName;
    if (t === "INPUT" || t === "SELECT" || t === "TEXTAREA" || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.key === "j" || ev.key === "ArrowDown") { step(1); ev.preventDefault(); }
    else if (ev.key === "k" || ev.key === "ArrowUp") { step(-1); ev.preventDefault(); }
  });

  var PACK = {p: "packed", c: "cut: its leading part", o: "beyond the budget", x: "another unit: not paid from this budget"};
  // a query's budget cut on one side: [spent, last rank packed, past rank k] with its modality's amount and unit
  function cutOf(q, i, side) {
    var c = (q.cut || [])[side], b = (X.budget[side] || {})[D.modalities[D.modality[i]]];
    return c && b ? {spent: c[0], last: c[1], beyond: c[2], amount: b[0], unit: b[1]} : null;
  }
  function cutText(cut, abstained) {
    if (!cut) return "";
    var amount = num(cut.amount, 0) + " " + esc(cut.unit || ""), spent = num(cut.spent, 0);
    var packs = cut.last ? "ranks 1–" + cut.last + " (" + spent + " of " + amount + ")" : "nothing (" + amount + ")";
    return "<p class='budget muted'>Budget: " + (abstained ? "had it answered, the cartridge would pack " : "the cartridge packs ") +
      packs + (cut.beyond ? "; packing goes on past rank " + D.k + " (to rank " + cut.last + ")" : "") + ".</p>";
  }
  // an answer that abstained says so above its pictures and hits: they show what it ranked, not what it handed over
  function abstNote(label, i, side) {
    return D.abstained[i][side] ? "<p class=abstained id=abstained-" + label.toLowerCase() + "><b>" + label + " abstained: hands over " +
      "nothing.</b> The ranking below is what it ranked; its answer gives the reader none of it, so recall, MRR, nDCG and the " +
      "budget measures count 0 for it (the ranking's own values beside them above).</p>" : "";
  }
  function hitsTable(hits, label, i, side, cut) {
    if (hits == null) return "<p class=muted>No cartridge shown for " + label + " (the note at the top says why).</p>";
    var abst = D.abstained[i][side];
    if (!hits.length) return "<p class=muted>The system returned nothing.</p>";
    var out = [cutText(cut, abst) + "<table><colgroup><col style='width:2.6rem'><col style='width:3.8rem'><col style='width:5rem'>" +
      "<col style='width:4.6rem'><col></colgroup><tr><th>rank</th><th>score</th><th>covers gold</th><th>budget</th>" +
      "<th>hit: id, source, extent; text</th></tr>"];
    hits.forEach(function (h) {
      var a = X.atoms[h[2]], src = a.sp != null ? a.id.slice(0, a.sp) : a.source, g = h[3].length ? "region " + h[3].map(function (x) { return x + 1; }).join(", ") : "—";
      var mem = a.memory ? "<br><b>memory</b>, cites " + esc(src) + "; citations supported " + a.memory.supported + "/" +
        a.memory.citations + ", units supported " + a.memory.units_supported + "/" + a.memory.units : "";
      var pack = h[4], cls = (h[3].length ? "covers" : "") + (pack ? " pack-" + pack : "");
      out.push("<tr class='" + cls + "'><td class=r>" + h[0] + "</td><td class=s>" + num(h[1], 3) +
        "</td><td class=g>" + g + "</td><td class=b>" + (pack ? esc(PACK[pack]) : "—") + "</td><td><code>" + esc(a.id) +
        "</code> <span class=muted>" + (a.sp != null ? "" : esc(src) + " ") + esc(a.extent) + "</span>" + mem + "<br>" + esc(a.text) + "</td></tr>");
      if (cut && cut.last === h[0]) {
        out.push("<tr class=cutline><td colspan=5>budget spent (" + num(cut.spent, 0) + " of " + num(cut.amount, 0) + " " + esc(cut.unit || "") +
          "): the cartridge ends here" + (abst ? ", and this answer abstained: it hands over nothing at all" : "") + "</td></tr>");
      }
    });
    out.push("</table>");
    return out.join("");
  }
  function valueCell(m, side, i) {
    var v = val(m.column, side, i), r = D.ranking[m.column];
    var rv = r ? r[side][i] : null;
    return "<td>" + num(v, 4) + (r && rv != null && rv !== v ? " <small class=ranking>ranking " + num(rv, 4) + "</small>" : "") + "</td>";
  }
  function detail(i) {
    var id = D.ids[i], q = X.queries[id] || {};
    var rows = D.measures.map(function (m) {
      return "<tr><th>" + esc(m.heading) + "</th>" + valueCell(m, 0, i) + valueCell(m, 1, i) + "</tr>";
    }).join("") + "<tr><th>abstained</th>" + D.abstained[i].map(function (x) {
      return "<td" + (x ? " class=abst>yes: hands over nothing" : ">no") + "</td>";
    }).join("") + "</tr>";
    var fail = D.failed[i];
    var gold = (q.gold || []).length ? "<table><tr><th>#</th><th>gold source</th><th>region</th><th>extent</th><th>atoms overlapping</th></tr>" +
      q.gold.map(function (g, j) {
        return "<tr><td>" + (j + 1) + "</td><td><code>" + esc(g[0]) + "</code></td><td><code>" + esc(g[1]) + "</code></td><td>" +
          num(g[2], 1) + "</td><td>" + (g[3] == null ? "—" : g[3]) + "</td></tr>";
      }).join("") + "</table>" : "<p class=muted>No gold" + (D.unanswerable[i] ? " (unanswerable)" : " recorded here") + ".</p>";
    var pics = q.pictures || ["", ""];
    pane.innerHTML =
      "<p class=muted><code>" + esc(id) + "</code> · " + esc(D.modalities[D.modality[i]]) + (D.unanswerable[i] ? " · unanswerable" : "") +
      " · <a href='#q=" + encodeURIComponent(id) + "'>permalink</a></p>" +
      "<p class=q id=question>" + esc(q.question || "(question not available)") + "</p>" +
      "<p class=muted>as_of: " + esc(q.as_of || "—") + (fail[0] ? " · A failed" : "") + (fail[1] ? " · B failed" : "") + "</p>" +
      "<table class=metrics><tr><th></th><th>A</th><th>B</th></tr>" + rows + "</table>" +
      "<h3>Gold</h3>" + gold +
      "<div class=sides><div class=side id=side-a><h3>A</h3>" + abstNote("A", i, 0) + pics[0] + hitsTable(q.a, "A", i, 0, cutOf(q, i, 0)) +
      "</div><div class=side id=side-b><h3>B</h3>" + abstNote("B", i, 1) + pics[1] + hitsTable(q.b, "B", i, 1, cutOf(q, i, 1)) + "</div></div>";
  }
  function fromHash() {
    var m = /^#q=(.*)$/.exec(location.hash);
    if (!m) return false;
    var i = byId[decodeURIComponent(m[1])];
    if (i == null) return false;
    go(i);
    return true;
  }
  window.addEventListener("hashchange", fromHash);
  apply();
  if (!fromHash() && shown.length) go(shown[0]);
  window.benchCompare = {shown: function () { return shown.map(function (i) { return D.ids[i]; }); }, selected: function () { return D.ids[sel]; },
    ready: performance.now()};  // for tests and the render time in docs/comparing.md
})();
