// Shared by every Harvest page: periodic refresh (<meta name="harvest-refresh">), without losing the scroll position.
(function () {
  "use strict";
  var meta = document.querySelector('meta[name="harvest-refresh"]');
  var seconds = meta ? Number(meta.getAttribute("content")) : 0;
  if (seconds > 0) {
    var y = sessionStorage.getItem("harvest-scroll:" + location.pathname);
    if (y) window.scrollTo(0, Number(y));
    setTimeout(function () {
      sessionStorage.setItem("harvest-scroll:" + location.pathname, String(window.scrollY));
      location.reload();
    }, seconds * 1000);
  }
})();
