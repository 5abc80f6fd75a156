// Shared by every Harvest page: periodic refresh (<meta name="harvest-refresh">), without losing the scroll position.
// A refresh never fires once the user is leaving the page: a reload then would abort their navigation to a slower page.
(function () {
  "use strict";
  var meta = document.querySelector('meta[name="harvest-refresh"]');
  var seconds = meta ? Number(meta.getAttribute("content")) : 0;
  if (seconds > 0) {
    var y = sessionStorage.getItem("harvest-scroll:" + location.pathname);
    if (y) window.scrollTo(0, Number(y));
    var timer = setTimeout(function () {
      sessionStorage.setItem("harvest-scroll:" + location.pathname, String(window.scrollY));
      location.reload();
    }, seconds * 1000);
    window.addEventListener("beforeunload", function () {
      clearTimeout(timer);
    });
  }
})();
