// Refreshes the page's live part in place: asks the same URL for that part alone every few
// seconds and swaps it in, so a page follows its jobs without reloading. Our own few lines:
// no library. The server sends only HTML it rendered and escaped itself.
"use strict";
(function () {
  const live = document.getElementById("live");
  const stamp = document.getElementById("refreshed");
  const every = Number(document.body.dataset.refreshMs) || 2000;
  if (!live) return;
  let busy = false;
  async function refresh() {
    if (busy || document.hidden) return;
    busy = true;
    try {
      const answer = await fetch(window.location.href, {
        headers: { "X-Dashboard-Part": "live" },
        credentials: "same-origin",
        cache: "no-store",
      });
      if (!answer.ok) throw new Error("HTTP " + answer.status);
      live.innerHTML = await answer.text();
      stamp.textContent = "updated " + new Date().toLocaleTimeString();
      stamp.classList.remove("problem");
    } catch (err) {
      stamp.textContent = "not refreshed: " + err.message;
      stamp.classList.add("problem");
    } finally {
      busy = false;
    }
  }
  window.setInterval(refresh, every);
  document.addEventListener("visibilitychange", refresh);
})();
