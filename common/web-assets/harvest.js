// Shared by every Harvest page: periodic refresh (<meta name="harvest-refresh">), without losing the scroll position,
// and sortable, searchable tables. A refresh never fires once the user is leaving the page (a reload then would abort
// their navigation to a slower page) nor while they type in a table's search box.
(function () {
  "use strict";

  // ---------------------------------------------------------------------------------------------- tables
  // Every table with a header and two or more rows gets a search box above it (rows without the text are hidden) and
  // headings that sort it on click or Enter: numbers by value (a cell's data-sort, or that of an element in it, wins;
  // "1.5 GiB" counts in bytes), other text in natural order ("node-2" before "node-10"). Tables whose rows are headed
  // by a <th> (a facts table, a transposed one) are left alone. The choices survive the page's refresh.
  var UNITS = { b: 1, kib: 1024, mib: 1048576, gib: 1073741824, tib: 1099511627776 };

  function sortKey(cell) {
    if (!cell) return "";
    var own = cell.getAttribute("data-sort");
    if (own !== null) return own;
    var inner = cell.querySelector("[data-sort]");
    if (inner) return inner.getAttribute("data-sort") || "";
    return (cell.textContent || "").trim();
  }

  function asNumber(text) {
    var m = /^(-?\d+(?:\.\d+)?)\s*(b|kib|mib|gib|tib)?\b/i.exec(String(text).replace(/,/g, ""));
    if (!m) return null;
    return Number(m[1]) * (m[2] ? UNITS[m[2].toLowerCase()] : 1);
  }

  function compare(a, b) {
    var x = asNumber(a);
    var y = asNumber(b);
    if (x !== null && y !== null) return x - y;
    if (x !== null) return -1;
    if (y !== null) return 1;
    return String(a).localeCompare(String(b), undefined, { numeric: true, sensitivity: "base" });
  }

  function load(key) {
    try {
      return JSON.parse(sessionStorage.getItem(key) || "{}") || {};
    } catch (e) {
      return {};
    }
  }

  function enhance(table, index) {
    var head = table.tHead;
    var body = table.tBodies[0];
    if (!head || !body || body.rows.length < 2 || !head.rows.length) return;
    if (body.rows[0].cells[0] && body.rows[0].cells[0].tagName === "TH") return;
    var key = "harvest-table:" + location.pathname + ":" + (table.id || index);
    var state = load(key);
    var save = function () {
      sessionStorage.setItem(key, JSON.stringify(state));
    };
    var headings = head.rows[head.rows.length - 1].cells;

    var search = document.createElement("input");
    search.type = "search";
    search.className = "table-search";
    search.placeholder = "Search " + body.rows.length + " rows";
    search.setAttribute("aria-label", "Search the table" + (table.id ? " " + table.id : ""));
    if (table.id) search.setAttribute("data-table", table.id);
    search.value = state.q || "";
    table.parentNode.insertBefore(search, table);

    var filter = function () {
      var q = search.value.trim().toLowerCase();
      for (var i = 0; i < body.rows.length; i++) {
        var row = body.rows[i];
        row.hidden = q !== "" && (row.textContent || "").toLowerCase().indexOf(q) < 0;
      }
    };

    var sort = function () {
      for (var h = 0; h < headings.length; h++) headings[h].removeAttribute("aria-sort");
      if (typeof state.col !== "number" || !headings[state.col]) return;
      var col = state.col;
      var dir = state.desc ? -1 : 1;
      var rows = Array.prototype.slice.call(body.rows);
      rows.forEach(function (r, i) {
        r.harvestOrder = i;
      });
      rows.sort(function (r1, r2) {
        return dir * compare(sortKey(r1.cells[col]), sortKey(r2.cells[col])) || r1.harvestOrder - r2.harvestOrder;
      });
      rows.forEach(function (r) {
        body.appendChild(r);
      });
      headings[col].setAttribute("aria-sort", state.desc ? "descending" : "ascending");
    };

    Array.prototype.forEach.call(headings, function (th, col) {
      if (!(th.textContent || "").trim()) return;
      th.classList.add("sortable");
      th.tabIndex = 0;
      var choose = function () {
        state.desc = state.col === col ? !state.desc : false;
        state.col = col;
        save();
        sort();
      };
      th.addEventListener("click", choose);
      th.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") {
          e.preventDefault();
          choose();
        }
      });
    });
    search.addEventListener("input", function () {
      state.q = search.value;
      save();
      filter();
    });
    sort();
    filter();
  }

  Array.prototype.forEach.call(document.querySelectorAll("main table"), enhance);

  // ---------------------------------------------------------------------------------------------- refresh
  var meta = document.querySelector('meta[name="harvest-refresh"]');
  var seconds = meta ? Number(meta.getAttribute("content")) : 0;
  if (seconds > 0) {
    var y = sessionStorage.getItem("harvest-scroll:" + location.pathname);
    if (y) window.scrollTo(0, Number(y));
    var timer;
    var reload = function () {
      var active = document.activeElement;
      if (active && active.classList && active.classList.contains("table-search")) {
        timer = setTimeout(reload, seconds * 1000);
        return;
      }
      sessionStorage.setItem("harvest-scroll:" + location.pathname, String(window.scrollY));
      location.reload();
    };
    timer = setTimeout(reload, seconds * 1000);
    window.addEventListener("beforeunload", function () {
      clearTimeout(timer);
    });
  }
})();
