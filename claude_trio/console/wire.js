// The gateway's websocket protocol (protocol/fanout/wire.py): one JSON op or frame per text
// message. One Connection reconnects by itself; the caller re-attaches its sessions from the
// last seq it holds on each "open" (exact resume: no event lost, none repeated).

export class Connection {
  constructor(token, handlers) {
    this.token = token;
    this.handlers = handlers; // onopen(), onframe(frame), onclose(authFailed)
    this.nextId = 1;
    this.ws = null;
    this.stopped = false;
    this.everOpened = false;
    this.retryMs = 500;
  }

  url() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    return `${scheme}//${location.host}/?token=${encodeURIComponent(this.token)}`;
  }

  start() {
    const ws = new WebSocket(this.url());
    this.ws = ws;
    let opened = false;
    ws.onopen = () => {
      opened = true;
      this.everOpened = true;
      this.retryMs = 500;
      this.handlers.onopen();
    };
    ws.onmessage = (message) => {
      let frame;
      try {
        frame = JSON.parse(message.data);
      } catch {
        return;
      }
      this.handlers.onframe(frame);
    };
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      // A handshake refused before it ever opened: the token is wrong (or the origin).
      const authFailed = !opened && !this.everOpened;
      this.handlers.onclose(authFailed);
      if (!authFailed && !this.stopped) {
        setTimeout(() => this.start(), this.retryMs);
        this.retryMs = Math.min(this.retryMs * 2, 5000);
      }
    };
  }

  stop() {
    this.stopped = true;
    if (this.ws) this.ws.close();
  }

  // Sends an op; its id (the reply carries it). False when not connected.
  send(op, fields = {}) {
    const id = `c${this.nextId++}`;
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return null;
    this.ws.send(JSON.stringify({ op, id, ...fields }));
    return id;
  }
}
