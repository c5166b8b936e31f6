// luci-scgi: a ucode request handler (LuCI's /usr/share/ucode/luci/uhttpd.uc)
// served over SCGI, the way uhttpd's ucode_prefix serves it in-process. The
// handler is compiled and run once, here; each request is answered by a fork
// of this warm VM made before the request came, so no page pays for an exec,
// a compile or a fork.
//
//   ucode luci-scgi.uc SOCKET HANDLER
//
// SOCKET: the unix socket to listen on (a stale one is replaced). HANDLER:
// a ucode template that defines global.handle_request(env). A request's
// process gets the global `uhttpd` object uhttpd gives its handlers: send()
// and sendc() write to the client, recv([length]) reads the request body
// (null at its end), urldecode() and urlencode() as uhttpd converts, and
// docroot. env holds the request's CGI variables (SCRIPT_FILENAME the
// handler, no DOCUMENT_ROOT), PATH_INFO only when it is not empty,
// HTTP_VERSION as a number, and headers by lower-case name with URL the
// request target. A request's
// process has no stdout (uloop's tasks write theirs to /dev/null): what
// the handler prints outside a render() capture is not sent, where uhttpd
// sends it; LuCI writes its pages through uhttpd.send.

'use strict';

import * as socket from 'socket';
import * as uloop from 'uloop';
import { dup2, open, stat, unlink } from 'fs';

const SOCKET = ARGV[0];
const HANDLER = ARGV[1];

if (!SOCKET || !HANDLER) {
	warn('usage: ucode luci-scgi.uc SOCKET HANDLER\n');
	exit(2);
}

// A copy of stderr on a descriptor of its own, where a request's process
// finds it again (a task's own stderr is /dev/null). Kept for the life of
// the program: the handle closes its descriptor when it goes.
const log_copy = open('/dev/null', 'w');

dup2(2, log_copy.fileno());

// The client of the request being served, in a request's process, and
// what was read past the SCGI head: the start of the body.
let conn = null;
let body_left = 0;
let pending = '';

function send_all(data) {
	let sent = 0;

	while (sent < length(data)) {
		let n = conn.send(sent ? substr(data, sent) : data);

		if (n == null || n <= 0)
			break;

		sent += n;
	}

	return sent;
}

// The CGI head a handler sends in pieces (LuCI sends each header field as
// four) goes out in one write once it ends: every write costs a system call
// on a router's CPU and may wake the server for a few bytes. The body goes
// out as it comes, so a handler that streams is not held back.
let head = '';
let head_sent = false;

function send(value) {
	if (value == null)
		return 0;

	let data = type(value) == 'string' ? value : '' + value;

	if (head_sent)
		return send_all(data);

	head += data;

	// Only the end can hold the blank line that ends the head.
	let tail = substr(head, -(length(data) + 3));

	if (index(tail, '\r\n\r\n') < 0 && index(tail, '\n\n') < 0)
		return length(data);

	head_sent = true;

	let whole = head;

	head = '';

	return send_all(whole) == length(whole) ? length(data) : 0;
}

// A head that never ended (the server then answers 502), at the end.
function flush() {
	if (length(head))
		send_all(head);

	head = '';
}

// uhttpd reads at most 8192 bytes unless asked for another length; the
// body ends after CONTENT_LENGTH bytes (the server keeps the connection open).
function recv(len) {
	if (len != null && type(len) != 'int')
		die('Argument not an integer');

	let want = min(len ?? 8192, body_left);

	if (want <= 0)
		return null;

	let chunk;

	if (length(pending)) {
		chunk = substr(pending, 0, want);
		pending = substr(pending, length(chunk));
	}
	else {
		chunk = conn.recv(want);

		if (chunk == null || chunk == '')
			return null;
	}

	body_left -= length(chunk);

	return chunk;
}

const HEXDIGITS = '0123456789abcdefABCDEF';

// %XX decoded, nothing else; a malformed escape or a result over 4095
// bytes raises, as uhttpd's conversion does.
function urldecode(value) {
	if (value == null)
		return '';

	let s = '' + value, out = [], n = 0;

	for (let i = 0; i < length(s); i++) {
		let c = substr(s, i, 1);

		if (c == '%') {
			let pair = substr(s, i + 1, 2);

			if (i + 2 >= length(s) || index(HEXDIGITS, substr(pair, 0, 1)) < 0 ||
			    index(HEXDIGITS, substr(pair, 1, 1)) < 0)
				die('malformed string on URL conversion\n');

			c = chr(hex(pair));
			i += 2;
		}

		if (++n > 4095)
			die('buffer overflow on URL conversion\n');

		push(out, c);
	}

	return join('', out);
}

// Letters, digits and -_.~ kept; every other byte as %xx (lower case).
function urlencode(value) {
	if (value == null)
		return '';

	let s = '' + value, out = [], n = 0;

	for (let i = 0; i < length(s); i++) {
		let b = ord(s, i);
		let keep = (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5a) ||
			(b >= 0x61 && b <= 0x7a) || b == 0x2d || b == 0x5f || b == 0x2e || b == 0x7e;
		let piece = keep ? chr(b) : sprintf('%%%02x', b);

		n += length(piece);

		if (n > 4096)
			die('buffer overflow on URL conversion\n');

		push(out, piece);
	}

	return join('', out);
}

global.uhttpd = {
	send,
	sendc: send,
	recv,
	urldecode,
	urlencode,
	docroot: null
};

// The SCGI request head: a netstring of NUL-separated names and values.
// Read in as few calls as it takes (one, most often, with the start of the
// body): a call costs more on a router's CPU than the bytes it moves.
function read_head() {
	let buf = '', colon;

	while ((colon = index(buf, ':')) < 0) {
		if (length(buf) > 7)
			return null;

		let part = conn.recv(8192);

		if (part == null || part == '')
			return null;

		buf += part;
	}

	let digits = substr(buf, 0, colon);

	if (colon == 0 || colon > 7 || !match(digits, /^[0-9]+$/))
		return null;

	let need = +digits + 1;

	buf = substr(buf, colon + 1);

	while (length(buf) < need) {
		let part = conn.recv(max(need - length(buf), 8192));

		if (part == null || part == '')
			return null;

		buf += part;
	}

	let head = substr(buf, 0, need);

	pending = substr(buf, need);

	if (substr(head, -1) != ',')
		return null;

	let fields = split(substr(head, 0, -1), '\0');
	let vars = {};

	// The last field is the empty one after the final NUL.
	for (let i = 0; i + 1 < length(fields); i += 2)
		vars[fields[i]] = fields[i + 1];

	return vars;
}

// env as uhttpd builds it for its ucode handlers.
function request_env(vars) {
	let env = {}, headers = {};

	// SCGI always sends CONTENT_LENGTH; uhttpd has none without a body,
	// and LuCI takes any CONTENT_LENGTH, "0" too, for a body to parse.
	// (An explicit `Content-Length: 0` loses it too: nothing to read.)
	// uhttpd gives its handlers no DOCUMENT_ROOT (uhttpd.docroot has it),
	// and LuCI writes the one it gets into its pages.
	for (let k, v in vars) {
		if (k == 'SCGI' || k == 'DOCUMENT_ROOT' || (k == 'PATH_INFO' && v == '') ||
		    (k == 'CONTENT_LENGTH' && v == '0'))
			continue;

		env[k] = v;

		if (index(k, 'HTTP_') == 0)
			headers[lc(replace(substr(k, 5), '_', '-'))] = v;
	}

	// uhttpd's own: the request target among the headers, the handler
	// as the script.
	headers.URL = vars.REQUEST_URI;
	env.SCRIPT_FILENAME = HANDLER;

	if (vars.CONTENT_TYPE != null)
		headers['content-type'] = vars.CONTENT_TYPE;

	if (vars.CONTENT_LENGTH != null && vars.CONTENT_LENGTH != '0')
		headers['content-length'] = vars.CONTENT_LENGTH;

	env.HTTP_VERSION = (vars.SERVER_PROTOCOL == 'HTTP/1.0') ? 1.0 : 1.1;
	env.headers = headers;

	return env;
}

function fail_with(e) {
	let ctx = e?.stacktrace?.[0]?.context;

	send(`Status: 500 Internal Server Error\r\nContent-Type: text/plain\r\n\r\n` +
		`Exception while executing ucode program ${HANDLER}:\n` +
		`${e?.type ?? 'Error'}: ${e?.message ?? e}\n` +
		(ctx ? `${ctx}\n` : ''));
}

// One request, in its own process.
function serve() {
	let vars = read_head();

	if (vars == null) {
		warn('luci-scgi: a request without a valid SCGI head\n');
		return;
	}

	body_left = +vars.CONTENT_LENGTH || 0;
	uhttpd.docroot = vars.DOCUMENT_ROOT;

	try {
		global.handle_request(request_env(vars));
	}
	catch (e) {
		fail_with(e);
	}

	flush();
	// Now, not at the exit, which first tears down this copy of the VM:
	// the server sees the answer end at once.
	conn.close();
}

// The handler runs once, here: what it imports is compiled now, and what a
// template prints while loading is dropped, as uhttpd drops it.
let handler = loadfile(HANDLER, {
	raw_mode: false,
	lstrip_blocks: true,
	trim_blocks: true,
	strict_declarations: false
});

render(handler);

if (type(global.handle_request) != 'function') {
	warn(`luci-scgi: ${HANDLER} declares no handle_request() callback\n`);
	exit(1);
}

// Importing uloop started a loop, and what the handler registered in it
// while loading is watched there: LuCI's ubus connection, for one. Each
// request's process calls over that connection, and a parent watching it
// too would read the replies meant for the request, which then waits for
// them forever. A fresh loop watches the listening socket only, as
// uhttpd's loop, started after its handler is loaded, does.
uloop.done();
uloop.init();

if (stat(SOCKET)?.type == 'socket')
	unlink(SOCKET);

// Non-blocking: every waiting spare wakes for a connection, and those that
// find it taken go back to waiting.
const server = socket.listen({ path: SOCKET }, null,
	{ socktype: socket.SOCK_STREAM | socket.SOCK_NONBLOCK });

if (!server) {
	warn(`luci-scgi: cannot listen on ${SOCKET}: ${socket.error()}\n`);
	exit(1);
}

// Requests are taken by spares: forks of this process waiting on the
// listening socket. A fork costs a router's one core milliseconds, so a
// spare's successor is made once the spare has answered, not while it
// answers; only when both are busy is one more made at once.
const SPARES = 2;

// The parent's line to its spares: each fork closes its copy of `keep` at
// once, so the spares read the line's end when the parent ends, however it
// ends, and go with it.
const line = socket.pair(socket.SOCK_STREAM);
const keep = line[0], lifeline = line[1];
let idle = 0;

// The parent's watch on its end of each spare's pair. A spare forked
// while the parent is between the events of one epoll_wait inherits the
// rest of them: libubox keeps them in globals that uloop.done() leaves,
// and the spare's first uloop.run() would hand them to its copies of these
// watches, reading what its siblings tell the parent and forking spares of
// its own. Deleting a watch drops its events.
let watches = [];

// A spare: waits for a connection, tells the parent over `cue` that it took
// one, serves it and ends.
function spare(cue) {
	for (let w in watches) {
		let end = w.handle();

		w.delete();
		end.close();
	}
	keep.close();
	dup2(log_copy.fileno(), 2);
	uloop.init();

	let taken = null;

	uloop.handle(lifeline, () => uloop.end(), uloop.ULOOP_READ);
	uloop.handle(server, () => {
		taken = server.accept();

		if (taken)
			uloop.end();
	}, uloop.ULOOP_READ);
	uloop.run();
	// A request's process watches nothing, as uhttpd's forks do not.
	uloop.done();

	if (!taken)
		return;

	cue.send('t');
	conn = taken;
	serve();
}

// `later`: a second from now, if one is still missing; the spares already
// waiting take the requests meanwhile. So is one retried that could not be
// made for want of descriptors: the handler does not end.
function start_spare(later) {
	if (later)
		return uloop.timer(1000, () => { if (idle < SPARES) start_spare(); });

	let pair = socket.pair(socket.SOCK_STREAM);

	if (!pair) {
		warn(`luci-scgi: no spare made: ${socket.error()}\n`);
		return start_spare(true);
	}

	let mine = pair[0], its = pair[1], born = time(), busy = false, watch;

	// With no input callback, uloop (ucode 81205a2) never closes a
	// finished task's output pipe: one descriptor lost per request. When
	// its fork fails it keeps the task's four pipe ends: retried here, that
	// would lose four a second until none were left. The handler ends
	// instead, and procd starts it again with none lost.
	if (!uloop.task(() => { mine.close(); spare(its); }, null, () => null)) {
		warn(`luci-scgi: no spare made: ${uloop.error()}; ending for a fresh start\n`);
		exit(1);
	}

	idle++;
	its.close();

	// A word when it takes a connection; the end of the pair when it ends.
	// Both may come at once.
	watch = uloop.handle(mine, (flags, eof, error) => {
		if (!busy && length(mine.recv(16) ?? '')) {
			busy = true;

			if (--idle == 0)
				start_spare();
		}

		if (!eof && !error)
			return;

		watch.delete();
		mine.close();
		watches = filter(watches, (w) => w != watch);

		if (!busy)
			idle--;

		if (idle >= SPARES)
			return;

		// One that died waiting, young, is not replaced in a tight loop.
		start_spare(!busy && time() - born < 1);
	}, uloop.ULOOP_READ);
	push(watches, watch);
}

for (let i = 0; i < SPARES; i++)
	start_spare();

uloop.run();
