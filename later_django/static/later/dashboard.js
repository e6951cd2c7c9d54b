// Refresh the overview's live panels in place, without reloading the page.
// The server renders the fragment (escaped like every admin page); this only swaps it in.
"use strict";
(function () {
  const panel = document.getElementById("later-live");
  if (!panel || !window.fetch) {
    return;
  }
  const url = panel.dataset.refreshUrl;
  const seconds = Math.max(parseInt(panel.dataset.refreshSeconds, 10) || 5, 1);
  let busy = false;

  async function refresh() {
    if (busy || document.hidden) {
      return;
    }
    busy = true;
    try {
      const response = await fetch(url, {
        credentials: "same-origin",
        headers: { "X-Requested-With": "XMLHttpRequest" },
      });
      if (response.redirected) {
        // The session ended: reload so the admin shows its login page.
        window.location.reload();
      } else if (response.ok) {
        panel.innerHTML = await response.text();
        panel.dataset.refreshedAt = String(Date.now());
        panel.classList.remove("later-stale");
      } else {
        panel.classList.add("later-stale");
      }
    } catch (error) {
      panel.classList.add("later-stale");
    } finally {
      busy = false;
    }
  }

  window.setInterval(refresh, seconds * 1000);
  document.addEventListener("visibilitychange", refresh);
})();
