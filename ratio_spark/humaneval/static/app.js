// The annotation page: save every answer the moment it is given, keep both lists in step, keyboard shortcuts.
// Answers go out one at a time, in the order given, so a quick change of mind cannot arrive first.
(() => {
  "use strict";
  const root = document.getElementById("study");
  if (!root) return;
  const id = root.dataset.assignment;
  const items = [...root.querySelectorAll(".candidate")];
  const saveStatus = document.getElementById("save-status");
  const comment = document.getElementById("comment");
  let queue = Promise.resolve();
  let pending = 0;

  function setPending(delta) {
    pending += delta;
    root.dataset.pending = String(pending);
  }

  function show(state) {
    document.getElementById("labelled-count").textContent = state.labelled;
    document.getElementById("required-count").textContent = state.required;
    document.getElementById("preference-state").textContent = state.preference ? "given" : "missing";
    document.getElementById("complete-badge").hidden = !state.complete;
    root.dataset.complete = String(state.complete);
  }

  function send(what, body, onSaved) {
    setPending(1);
    saveStatus.classList.remove("failed");
    saveStatus.textContent = "Saving…";
    queue = queue.then(async () => {
      try {
        const response = await fetch(`/api/assignments/${id}/${what}`, {
          method: "POST", credentials: "same-origin",
          headers: {"Content-Type": "application/json"}, body: JSON.stringify(body),
        });
        if (!response.ok) {
          const detail = await response.json().catch(() => ({}));
          throw new Error(detail.detail ? JSON.stringify(detail.detail) : `HTTP ${response.status}`);
        }
        show(await response.json());
        if (onSaved) onSaved();
        if (pending === 1) saveStatus.textContent = "All answers saved.";
      } catch (error) {
        saveStatus.classList.add("failed");
        saveStatus.textContent = `Not saved (${error.message}). Your last answer is not stored: check the connection and give it again.`;
        root.dataset.failed = "true";
      } finally {
        setPending(-1);
      }
    });
  }

  function mark(li, value) {
    li.classList.toggle("is-useful", value === "useful");
    li.classList.toggle("is-not-useful", value === "not-useful");
  }

  function twins(cid) {
    return items.filter((li) => li.dataset.cid === cid);
  }

  function label(input) {
    const li = input.closest(".candidate");
    const cid = li.dataset.cid;
    for (const twin of twins(cid)) {  // the same candidate in the other list shows the same answer
      twin.querySelector(`input[value="${input.value}"]`).checked = true;
      mark(twin, input.value);
      twin.classList.add("unsaved");
    }
    send("labels", {candidate_id: cid, useful: input.value === "useful"},
         () => twins(cid).forEach((twin) => twin.classList.remove("unsaved")));
  }

  root.addEventListener("change", (event) => {
    const input = event.target;
    if (input.classList.contains("label-choice")) label(input);
    else if (input.name === "preference") send("preference", {preference: input.value});
  });

  let commentTimer = null;
  let commentSent = comment.value;
  function saveComment() {
    clearTimeout(commentTimer);
    if (comment.value === commentSent) return;
    commentSent = comment.value;
    send("comment", {comment: comment.value});
  }
  comment.addEventListener("input", () => { clearTimeout(commentTimer); commentTimer = setTimeout(saveComment, 800); });
  comment.addEventListener("change", saveComment);
  window.addEventListener("pagehide", () => {  // leaving within the pause: send what was typed on its way out
    if (comment.value === commentSent) return;
    commentSent = comment.value;
    fetch(`/api/assignments/${id}/comment`, {method: "POST", credentials: "same-origin", keepalive: true,
      headers: {"Content-Type": "application/json"}, body: JSON.stringify({comment: comment.value})});
  });

  // ---- keyboard
  // The current candidate: the last one focused, clicked or marked (a click does not focus a radio everywhere).
  let at = -1;
  function setCurrent(li) {
    if (at >= 0) items[at].classList.remove("current");
    at = li ? items.indexOf(li) : -1;
    if (li) li.classList.add("current");
  }
  function current() {
    return at;
  }
  root.addEventListener("focusin", (event) => setCurrent(event.target.closest(".candidate")));
  root.addEventListener("click", (event) => { const li = event.target.closest(".candidate"); if (li) setCurrent(li); });
  function focusItem(index) {
    const li = items[index];
    setCurrent(li);
    (li.querySelector("input:checked") || li.querySelector("input")).focus();
    li.scrollIntoView({block: "nearest"});
  }
  function move(step) {
    const at = current();
    focusItem(at < 0 ? (step > 0 ? 0 : items.length - 1) : Math.min(items.length - 1, Math.max(0, at + step)));
  }
  function choose(value) {
    let at = current();
    if (at < 0) at = Math.max(0, items.findIndex((li) => !li.querySelector("input:checked")));
    const input = items[at].querySelector(`input[value="${value}"]`);
    input.checked = true;
    label(input);
    if (at + 1 < items.length) focusItem(at + 1);
    else document.querySelector('input[name="preference"]').focus();
  }
  function prefer(value) {
    const input = document.querySelector(`input[name="preference"][value="${value}"]`);
    input.checked = true;
    input.focus();
    send("preference", {preference: value});
  }
  function go(linkId) {
    const link = document.getElementById(linkId);
    if (link) { saveComment(); queue.then(() => { window.location.href = link.href; }); }
  }
  const helpToggle = document.getElementById("help-toggle");
  const help = document.getElementById("shortcuts");
  function toggleHelp() {
    help.hidden = !help.hidden;
    helpToggle.setAttribute("aria-expanded", String(!help.hidden));
  }
  helpToggle.addEventListener("click", toggleHelp);

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.target === comment) {
      if (event.key === "Escape") { saveComment(); comment.blur(); }
      return;
    }
    const actions = {
      j: () => move(1), k: () => move(-1), u: () => choose("useful"), 1: () => choose("useful"),
      n: () => choose("not-useful"), 0: () => choose("not-useful"), a: () => prefer("A"), b: () => prefer("B"),
      t: () => prefer("tie"), c: () => comment.focus(), "]": () => go(document.getElementById("next") ? "next" : "finish"), "[": () => go("previous"),
      "?": toggleHelp,
    };
    const action = actions[event.key];
    if (!action) return;
    event.preventDefault();
    action();
  });
})();
