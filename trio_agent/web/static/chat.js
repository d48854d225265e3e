// The chat page of `trio-agent serve`: renders AG-UI events streamed over SSE.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { session: null, running: false, abortFetch: null };

function sessionFromHash() {
  const match = /^#s=([\w.-]+)$/.exec(location.hash);
  return match ? match[1] : null;
}

async function api(method, path, body) {
  const response = await fetch(path, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return response;
}

function setRunning(running) {
  state.running = running;
  $("status").textContent = running ? "working…" : "idle";
  $("status").dataset.state = running ? "running" : "idle";
  $("stop").disabled = !running;
  $("send").textContent = running ? "Steer" : "Send";
}

function scrollDown() {
  const box = $("messages");
  box.scrollTop = box.scrollHeight;
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function bubble(id, role) {
  let node = document.querySelector(`.message[data-id="${CSS.escape(id)}"]`);
  if (!node) {
    node = element("div", `message ${role}`);
    node.dataset.id = id;
    $("messages").append(node);
  }
  return node;
}

function thinking(id) {
  let node = document.querySelector(`.thinking[data-id="${CSS.escape(id)}"]`);
  if (!node) {
    node = element("div", "thinking");
    node.dataset.id = id;
    $("messages").append(node);
  }
  return node;
}

function toolCall(id, name) {
  let node = document.querySelector(`.tool-call[data-id="${CSS.escape(id)}"]`);
  if (!node) {
    node = element("div", "tool-call");
    node.dataset.id = id;
    node.append(element("span", "name", name || "tool"), element("span", "args", ""));
    $("messages").append(node);
  }
  return node;
}

function toolResult(id, text, isError) {
  const node = toolCall(id);
  let result = node.querySelector(".result");
  if (!result) {
    result = element("div", "result");
    node.append(result);
  }
  result.textContent = text;
  result.classList.toggle("error", Boolean(isError));
}

function notice(text, isError) {
  $("messages").append(element("div", isError ? "notice error" : "notice", text));
}

function handle(event) {
  switch (event.type) {
    case "RUN_STARTED":
      setRunning(true);
      break;
    case "TEXT_MESSAGE_START":
      bubble(event.messageId, event.role || "assistant");
      break;
    case "TEXT_MESSAGE_CONTENT":
      bubble(event.messageId, "assistant").textContent += event.delta;
      break;
    case "REASONING_MESSAGE_START":
      thinking(event.messageId);
      break;
    case "REASONING_MESSAGE_CONTENT":
      thinking(event.messageId).textContent += event.delta;
      break;
    case "TOOL_CALL_START":
      toolCall(event.toolCallId, event.toolCallName);
      break;
    case "TOOL_CALL_ARGS":
      toolCall(event.toolCallId).querySelector(".args").textContent += event.delta;
      break;
    case "TOOL_CALL_RESULT":
      toolResult(event.toolCallId, event.content, event.metadata && event.metadata.isError);
      break;
    case "RUN_FINISHED":
      setRunning(false);
      if (event.outcome && event.outcome.type === "cancelled") notice("stopped");
      refreshSessions();
      break;
    case "RUN_ERROR":
      setRunning(false);
      notice(`error: ${event.message}`, true);
      refreshSessions();
      break;
  }
  scrollDown();
}

// Reads an SSE response body and hands each event to `handle`.
async function consume(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = block
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trimStart())
        .join("\n");
      if (data) handle(JSON.parse(data));
    }
  }
}

async function stream(path, init) {
  const controller = new AbortController();
  state.abortFetch = controller;
  try {
    const response = await fetch(path, { ...init, signal: controller.signal });
    if (response.status === 200) await consume(response);
    return response.status;
  } catch (error) {
    if (error.name !== "AbortError") notice(`connection lost: ${error.message}`, true);
    return 0;
  } finally {
    if (state.abortFetch === controller) state.abortFetch = null;
    setRunning(false);
  }
}

function renderTranscript(messages) {
  $("messages").replaceChildren();
  for (const message of messages) {
    if (message.role === "user") {
      bubble(message.id, "user").textContent = message.content;
    } else if (message.role === "reasoning") {
      thinking(message.id).textContent = message.content;
    } else if (message.role === "assistant") {
      if (message.content) bubble(message.id, "assistant").textContent = message.content;
      for (const call of message.toolCalls || []) {
        toolCall(call.id, call.function.name).querySelector(".args").textContent =
          call.function.arguments;
      }
      if (message.metadata && message.metadata.stopReason === "aborted") notice("stopped");
      else if (message.metadata && message.metadata.errorMessage) {
        notice(`error: ${message.metadata.errorMessage}`, true);
      }
    } else if (message.role === "tool") {
      toolResult(message.toolCallId, message.content, message.error);
    }
  }
  scrollDown();
}

async function refreshSessions() {
  const response = await api("GET", "api/sessions");
  if (!response.ok) return;
  const { sessions } = await response.json();
  const list = $("sessions");
  list.replaceChildren();
  for (const session of sessions) {
    const item = element("li", "", session.title || "(new chat)");
    item.dataset.id = session.id;
    item.title = new Date(session.createdAt).toLocaleString();
    item.classList.toggle("current", session.id === state.session);
    item.classList.toggle("running", session.running);
    item.addEventListener("click", () => {
      location.hash = `s=${session.id}`;
    });
    list.append(item);
  }
}

async function openSession(id) {
  if (state.abortFetch) state.abortFetch.abort();
  state.session = id;
  setRunning(false);
  $("messages").replaceChildren();
  if (id) {
    const response = await api("GET", `api/sessions/${id}`);
    if (response.ok) {
      const transcript = await response.json();
      renderTranscript(transcript.messages);
      if (transcript.running) {
        setRunning(true);
        await stream(`api/sessions/${id}/runs/current`, { method: "GET" });
      }
    } else {
      notice("no such session (the server may have restarted)", true);
      state.session = null;
    }
  }
  await refreshSessions();
}

async function send(text) {
  if (!state.session) {
    const created = await (await api("POST", "api/sessions")).json();
    state.session = created.id;
    history.replaceState(null, "", `#s=${created.id}`);
    refreshSessions();
  }
  if (state.running) {
    const queued = await api("POST", `api/sessions/${state.session}/steer`, { text });
    if (queued.status === 202) return;
  }
  setRunning(true);
  refreshSessions();
  const status = await stream(`api/sessions/${state.session}/runs`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ prompt: text }),
  });
  if (status === 409) notice("the session is busy", true);
}

$("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  const text = $("prompt").value.trim();
  if (!text) return;
  $("prompt").value = "";
  send(text);
});
$("prompt").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) {
    event.preventDefault();
    $("composer").requestSubmit();
  }
});
$("stop").addEventListener("click", () => {
  if (state.session) api("POST", `api/sessions/${state.session}/abort`);
});
$("new-session").addEventListener("click", () => {
  history.pushState(null, "", location.pathname);
  openSession(null);
});
window.addEventListener("hashchange", () => openSession(sessionFromHash()));
openSession(sessionFromHash());
