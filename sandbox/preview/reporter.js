// kiln's error reporter for preview pages (served by the preview proxy at /__kiln/reporter.js,
// never part of the project). It reports what goes wrong in the page: uncaught errors,
// unhandled rejections, console.error/warn (console.log/info for the Console view only), Vite's
// overlay and module errors, failed module loads, failed fetch/XHR (network error or >= 500).
// Delivery: window.__kilnReport(json) when the render check installed it, else batched POSTs
// to /__kiln/preview-errors. It must never break the app: everything is guarded, the original
// console methods, fetch/XHR and WebSocket behave exactly as before, and the queue is bounded.
// It also reloads a page that missed Vite's reload after new dependency bundles (see there).
(function () {
  "use strict";
  if (window.__kilnReporter) return;
  window.__kilnReporter = true;

  var ENDPOINT = "/__kiln/preview-errors";
  var MAX_QUEUE = 100; // reports waiting to be sent; beyond it new ones are counted, not kept
  var MAX_BATCH = 50;
  var FLUSH_MS = 500;
  var MAX_PER_SECOND = 20; // reports accepted per second; the rest are dropped (and counted)
  var MAX_TEXT = 2000;
  var MAX_STACK = 4000;
  var queue = [];
  var merged = {}; // key -> queued report, to merge repeats while they wait
  var dropped = 0;
  var windowStart = 0;
  var inWindow = 0;
  var timer = null;
  var backoffUntil = 0;
  var reporting = false; // a report made while reporting (a console call of ours) is ignored
  var original = {};

  function text(value, limit) {
    try {
      var s;
      if (typeof value === "string") s = value;
      else if (value instanceof Error) s = value.name + ": " + value.message;
      else if (value === undefined) s = "undefined";
      else {
        try { s = JSON.stringify(value); } catch (e) { s = String(value); }
        if (s === undefined) s = String(value);
      }
      return s.length > limit ? s.slice(0, limit) : s;
    } catch (e) {
      return "";
    }
  }

  function stackOf(value) {
    try {
      if (value && typeof value.stack === "string") return value.stack.slice(0, MAX_STACK);
    } catch (e) { /* a getter that throws */ }
    return "";
  }

  function report(kind, message, stack, source) {
    if (reporting) return;
    reporting = true;
    try {
      var now = Date.now();
      if (now - windowStart >= 1000) { windowStart = now; inWindow = 0; }
      var item = {
        kind: kind,
        message: text(message, MAX_TEXT),
        stack: stack ? String(stack).slice(0, MAX_STACK) : "",
        source: source || null,
        url: String(location.href).slice(0, 500),
        count: 1
      };
      var key = kind + "\u0000" + item.message + "\u0000" + JSON.stringify(item.source);
      if (merged[key]) { merged[key].count += 1; return; }
      if (inWindow >= MAX_PER_SECOND || queue.length >= MAX_QUEUE) { dropped += 1; return; }
      inWindow += 1;
      merged[key] = item;
      queue.push(item);
      schedule();
    } catch (e) {
      /* never let reporting break the page */
    } finally {
      reporting = false;
    }
  }

  function schedule() {
    if (timer !== null) return;
    var wait = Math.max(FLUSH_MS, backoffUntil - Date.now());
    timer = setTimeout(flush, wait);
  }

  function takeBatch() {
    var batch = queue.splice(0, MAX_BATCH);
    for (var i = 0; i < batch.length; i++) {
      var b = batch[i];
      delete merged[b.kind + "\u0000" + b.message + "\u0000" + JSON.stringify(b.source)];
    }
    if (dropped > 0 && batch.length < MAX_BATCH) {
      batch.push({ kind: "console_warn", message: "kiln: " + dropped +
        " more errors were not reported (too many)", stack: "", source: null,
        url: String(location.href).slice(0, 500), count: 1 });
      dropped = 0;
    }
    return batch;
  }

  function flush(useBeacon) {
    timer = null;
    try {
      if (!queue.length && !dropped) return;
      if (typeof window.__kilnReport === "function") {
        var all = takeBatch();
        for (var i = 0; i < all.length; i++) window.__kilnReport(JSON.stringify(all[i]));
      } else {
        var body = JSON.stringify({ reports: takeBatch() });
        if (useBeacon === true && navigator.sendBeacon) {
          navigator.sendBeacon(ENDPOINT, new Blob([body], { type: "application/json" }));
        } else if (original.fetch) {
          original.fetch.call(window, ENDPOINT, {
            method: "POST", body: body, keepalive: body.length < 60000,
            credentials: "same-origin", headers: { "content-type": "application/json" }
          }).then(function (response) {
            if (response.status === 429 || response.status === 503) {
              backoffUntil = Date.now() + 2000;
            }
          }, function () { backoffUntil = Date.now() + 2000; });
        }
      }
      if (queue.length) schedule();
    } catch (e) { /* dropped */ }
  }

  // --- sources ---------------------------------------------------------------------------

  window.addEventListener("error", function (event) {
    try {
      var target = event.target;
      if (target && target !== window && target.tagName) {
        // A script, stylesheet or module preload that failed to load (seen in capture phase
        // only); a missing image is the app's business, not an error of the preview.
        var tag = String(target.tagName).toLowerCase();
        if (tag !== "script" && tag !== "link") return;
        var url = target.src || target.href || "";
        var kind = tag === "script" || /modulepreload/.test(target.rel || "") ? "module_load" : "network";
        report(kind, "failed to load " + tag + " " + url, "", null);
        return;
      }
      var error = event.error;
      var source = event.filename && event.lineno
        ? { file: event.filename, line: event.lineno, column: event.colno || 1 } : null;
      report("uncaught", error ? text(error, MAX_TEXT) : event.message, stackOf(error), source);
    } catch (e) { /* ignore */ }
  }, true);

  window.addEventListener("unhandledrejection", function (event) {
    try {
      var reason = event.reason;
      var message = text(reason, MAX_TEXT);
      if (isModuleLoadFailure(message)) {
        report("module_load", message, stackOf(reason), null);
        return;
      }
      report("unhandled_rejection", message, stackOf(reason), null);
    } catch (e) { /* ignore */ }
  });

  window.addEventListener("vite:preloadError", function (event) {
    try {
      var payload = event.payload;
      report("module_load", text(payload, MAX_TEXT), stackOf(payload), null);
    } catch (e) { /* ignore */ }
  });

  function isModuleLoadFailure(message) {
    return /Failed to fetch dynamically imported module|error loading dynamically imported module|Importing a module script failed|does not provide an export named|Failed to resolve module specifier/i.test(message);
  }

  // --- console ---------------------------------------------------------------------------

  var consoleKinds = { error: "console_error", warn: "console_warn", log: "console_log", info: "console_log" };
  Object.keys(consoleKinds).forEach(function (name) {
    try {
      var method = console[name];
      if (typeof method !== "function") return;
      original[name] = method;
      console[name] = function () {
        try {
          var parts = [];
          var stack = "";
          for (var i = 0; i < arguments.length; i++) {
            parts.push(text(arguments[i], MAX_TEXT));
            if (!stack) stack = stackOf(arguments[i]);
          }
          var message = parts.join(" ");
          var kind = consoleKinds[name];
          if (isModuleLoadFailure(message)) kind = "module_load";
          else if (/^\[(vite|hmr)\]/.test(message) && name === "error") kind = "vite_error";
          report(kind, message, stack, null);
        } catch (e) { /* ignore */ }
        return method.apply(this, arguments);
      };
    } catch (e) { /* leave the console as it is */ }
  });

  // --- network ---------------------------------------------------------------------------

  function sameReporter(url) {
    return String(url).indexOf(ENDPOINT) !== -1;
  }

  if (typeof window.fetch === "function") {
    original.fetch = window.fetch;
    window.fetch = function (input, init) {
      var method = "GET";
      var url = "";
      try {
        method = String((init && init.method) || (input && input.method) || "GET").toUpperCase();
        url = typeof input === "string" ? input : (input && input.url) || String(input);
      } catch (e) { /* keep defaults */ }
      var result = original.fetch.apply(this, arguments);
      try {
        if (!sameReporter(url)) {
          result.then(function (response) {
            if (response && response.status >= 500) {
              report("network", method + " " + url + " failed: " + response.status + " " +
                (response.statusText || ""), "", null);
            }
          }, function (error) {
            if (error && error.name === "AbortError") return;
            report("network", method + " " + url + " failed: network error (" +
              text(error, 300) + ")", "", null);
          });
        }
      } catch (e) { /* ignore */ }
      return result;
    };
  }

  if (window.XMLHttpRequest && XMLHttpRequest.prototype) {
    var open = XMLHttpRequest.prototype.open;
    var send = XMLHttpRequest.prototype.send;
    XMLHttpRequest.prototype.open = function (method, url) {
      try { this.__kiln = { method: String(method).toUpperCase(), url: String(url) }; } catch (e) { /* */ }
      return open.apply(this, arguments);
    };
    XMLHttpRequest.prototype.send = function () {
      try {
        var xhr = this;
        var info = xhr.__kiln;
        if (info && !sameReporter(info.url)) {
          xhr.addEventListener("loadend", function () {
            try {
              if (xhr.status >= 500) {
                report("network", info.method + " " + info.url + " failed: " + xhr.status + " " +
                  (xhr.statusText || ""), "", null);
              } else if (xhr.status === 0) {
                report("network", info.method + " " + info.url + " failed: network error", "", null);
              }
            } catch (e) { /* ignore */ }
          });
        }
      } catch (e) { /* ignore */ }
      return send.apply(this, arguments);
    };
  }

  // --- Vite's error overlay --------------------------------------------------------------

  function overlayText(overlay) {
    try {
      var root = overlay.shadowRoot;
      if (!root) return null;
      var pick = function (selector) {
        var node = root.querySelector(selector);
        return node ? node.textContent || "" : "";
      };
      var message = (pick(".message-body") || pick(".message")).trim();
      var file = pick(".file").trim();
      var source = null;
      var match = /^(.*?):(\d+):(\d+)\s*$/.exec(file);
      if (match) source = { file: match[1], line: +match[2], column: +match[3] };
      return { message: message || "Vite error", stack: (pick(".frame") + "\n" + pick(".stack")).trim(), source: source };
    } catch (e) {
      return null;
    }
  }

  var seenOverlays = typeof WeakSet === "function" ? new WeakSet() : null;
  function checkOverlay() {
    try {
      var overlays = document.getElementsByTagName("vite-error-overlay");
      for (var i = 0; i < overlays.length; i++) {
        var overlay = overlays[i];
        if (seenOverlays && seenOverlays.has(overlay)) continue;
        var found = overlayText(overlay);
        if (!found) continue;
        if (seenOverlays) seenOverlays.add(overlay);
        report("vite_error", found.message, found.stack, found.source);
      }
    } catch (e) { /* ignore */ }
  }

  function watchOverlays() {
    try {
      if (typeof MutationObserver !== "function" || !document.documentElement) return;
      new MutationObserver(function (records) {
        for (var i = 0; i < records.length; i++) {
          if (records[i].addedNodes.length) { checkOverlay(); return; }
        }
      }).observe(document.documentElement, { childList: true, subtree: true });
      checkOverlay();
    } catch (e) { /* ignore */ }
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", watchOverlays);
  else watchOverlays();

  // --- a page left behind by new dependency bundles ---------------------------------------
  // Vite bundles the app's dependencies again when a page imports one it has not bundled yet
  // (a package installed while it runs). When the new bundles replace ones pages already use,
  // it tells every page to reload, over each page's HMR WebSocket, and names the new bundles
  // with a new `?v=`. A page whose socket was not registered at that moment (it opens once
  // /@vite/client runs, while the page is still loading) never hears it: it may have loaded
  // some bundles before and some after (two copies of React: it throws) or have a request
  // answered 504, and it stays empty for good. So this page reloads itself when
  // - a module request of its own is answered 504 (Vite: "a page reload is going to ask for
  //   it"), or
  // - once Vite has registered its socket (a later reload reaches it), its entry module as the
  //   dev server serves it now names a bundle the page loaded under another `?v=`.
  // And when a module script of the page failed to load while no request of its own was
  // answered with an error status: a request cut at the network level (Chromium aborts those in
  // flight when the host's addresses change, ERR_NETWORK_CHANGED, as containers and networks
  // come and go on the machine), which no dev server message repairs. An app whose import is
  // really broken is answered 404/500 and keeps Vite's overlay instead.
  // At most MAX_RELOADS times in RELOAD_WINDOW_MS per tab: a dev server that keeps answering
  // 504 cannot make a page reload for ever.
  var MAX_RELOADS = 3;
  var RELOAD_WINDOW_MS = 30000;
  var RELOADS_KEY = "__kiln.staleReloads";
  var BUNDLE = /\/node_modules\/\.vite\/deps\/[^"'?#\s]+\?v=[\w.-]+/g;
  var MODULE_INITIATORS = { script: true, link: true, other: true };
  var reloading = false;

  function reloadStale(why) {
    try {
      if (reloading) return;
      var now = Date.now();
      var recent = JSON.parse(sessionStorage.getItem(RELOADS_KEY) || "[]").filter(function (t) {
        return now - t < RELOAD_WINDOW_MS;
      });
      if (recent.length >= MAX_RELOADS) return;
      recent.push(now);
      sessionStorage.setItem(RELOADS_KEY, JSON.stringify(recent));
      reloading = true;
      report("console_log", "kiln: reloading the page: " + why, "", null);
      location.reload();
    } catch (e) { /* no storage: Vite's own reload is all there is */ }
  }

  function sameOrigin(url) {
    return String(url).indexOf(location.origin + "/") === 0;
  }

  function watchModuleAnswers() {
    try {
      if (typeof PerformanceObserver !== "function") return;
      new PerformanceObserver(function (list) {
        var entries = list.getEntries();
        for (var i = 0; i < entries.length; i++) {
          var entry = entries[i];
          if (entry.responseStatus === 504 && MODULE_INITIATORS[entry.initiatorType] &&
              sameOrigin(entry.name)) {
            reloadStale("the dev server answered 504 for " + entry.name);
            return;
          }
        }
      }).observe({ type: "resource", buffered: true });
    } catch (e) { /* no resource timing: Vite's own reload is all there is */ }
  }

  function answeredWithError() {
    var entries = performance.getEntriesByType("resource");
    for (var i = 0; i < entries.length; i++) {
      if (sameOrigin(entries[i].name) && entries[i].responseStatus >= 400) return true;
    }
    return false;
  }

  function watchModuleFailures() {
    try {
      window.addEventListener("error", function (event) {
        var script = event.target;
        if (!script || script.tagName !== "SCRIPT" || script.type !== "module") return;
        if (!sameOrigin(script.src) || answeredWithError()) return;
        reloadStale("a module of the page did not load (" + script.src + ")");
      }, true);  // a script's error does not bubble: caught on its way down
    } catch (e) { /* ignore */ }
  }

  // Each bundle the page loaded (its path without `?v=`) -> the URL it loaded it from.
  function loadedBundles() {
    var loaded = {};
    var entries = performance.getEntriesByType("resource");
    for (var i = 0; i < entries.length; i++) {
      var url = entries[i].name;
      if (!sameOrigin(url)) continue;
      var found = url.slice(location.origin.length).match(BUNDLE);
      if (found) loaded[found[0].split("?")[0]] = found[0];
    }
    return loaded;
  }

  function checkEntry(src) {
    original.fetch.call(window, src, { cache: "no-store" }).then(function (response) {
      return response.ok ? response.text() : "";
    }).then(function (code) {
      var loaded = loadedBundles();
      var named = code.match(BUNDLE) || [];
      for (var i = 0; i < named.length; i++) {
        var before = loaded[named[i].split("?")[0]];
        if (before && before !== named[i]) {
          reloadStale("the dev server replaced its dependency bundles (" + before + ")");
          return;
        }
      }
    }).catch(function () { /* the dev server is away: its socket's close reloads the page */ });
  }

  function checkBundlesCurrent() {
    try {
      if (!original.fetch) return;
      var scripts = document.querySelectorAll("script[type=module][src]");
      for (var i = 0; i < scripts.length; i++) {
        var src = scripts[i].src;
        if (sameOrigin(src) && src.indexOf("/@vite/client") === -1) checkEntry(src);
      }
    } catch (e) { /* ignore */ }
  }

  function watchViteSocket() {
    try {
      var Native = window.WebSocket;
      if (typeof Native !== "function" || typeof Proxy !== "function") return;
      window.WebSocket = new Proxy(Native, {
        construct: function (target, args, newTarget) {
          var socket = Reflect.construct(target, args, newTarget);
          try {
            if (String(args[1]) === "vite-hmr") {
              socket.addEventListener("message", function (event) {
                try {
                  if (JSON.parse(event.data).type === "connected") checkBundlesCurrent();
                } catch (e) { /* not Vite's JSON */ }
              });
            }
          } catch (e) { /* the socket works as it would have */ }
          return socket;
        }
      });
    } catch (e) { /* leave WebSocket as it is */ }
  }

  watchModuleAnswers();
  watchModuleFailures();
  watchViteSocket();

  // Whatever is still queued goes out as the page leaves.
  window.addEventListener("pagehide", function () { flush(true); });
})();
