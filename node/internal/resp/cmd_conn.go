package resp

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// redisVersion is the Redis version reported to clients, which some of them
// check before using a command (HELLO, CLIENT SETINFO).
const redisVersion = "7.2.0"

func cmdPing(_ context.Context, c *conn, req *request) {
	switch len(req.args) {
	case 1:
		c.w.simple("PONG")
	case 2:
		c.w.bulk(req.args[1])
	default:
		c.fail("arity", errorf(prefixErr, "wrong number of arguments for 'ping' command"))
	}
}

func cmdEcho(_ context.Context, c *conn, req *request) { c.w.bulk(req.args[1]) }

// cmdHello answers HELLO [protover [AUTH username password] [SETNAME name]]:
// the protocol switch (2 or 3), optional authentication and the server's
// description.
func cmdHello(_ context.Context, c *conn, req *request) {
	proto := c.w.proto
	args := req.args[1:]
	if len(args) > 0 {
		v, err := strconv.Atoi(string(args[0]))
		if err != nil {
			c.fail("syntax", errorf(prefixErr, "Protocol version is not an integer or out of range"))
			return
		}
		if v != 2 && v != 3 {
			c.fail("noproto", "NOPROTO unsupported protocol version")
			return
		}
		proto, args = v, args[1:]
	}
	name, setName := "", false
	for len(args) > 0 {
		switch opt := lower(args[0]); {
		case opt == "auth" && len(args) >= 3:
			if !c.authenticate(string(args[2])) {
				return
			}
			args = args[3:]
		case opt == "setname" && len(args) >= 2:
			name, setName = string(args[1]), true
			args = args[2:]
		default:
			c.fail("syntax", errorf(prefixErr, "Syntax error in HELLO option '%s'", clip(args[0])))
			return
		}
	}
	if !c.authed {
		c.fail("noauth", prefixNoAuth+" HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		return
	}
	if setName {
		c.name = name
	}
	c.w.proto = proto
	c.w.mapHeader(7)
	c.w.bulkString("server")
	c.w.bulkString("redis")
	c.w.bulkString("version")
	c.w.bulkString(redisVersion)
	c.w.bulkString("proto")
	c.w.int(int64(proto))
	c.w.bulkString("id")
	c.w.int(c.id)
	c.w.bulkString("mode")
	c.w.bulkString(c.s.mode())
	c.w.bulkString("role")
	c.w.bulkString("master")
	c.w.bulkString("modules")
	c.w.array(0)
}

// cmdAuth answers AUTH token and AUTH username token (the user name is
// ignored: kvring's tokens name no users).
func cmdAuth(_ context.Context, c *conn, req *request) {
	if len(req.args) > 3 {
		c.fail("syntax", errorf(prefixErr, "syntax error"))
		return
	}
	if c.authenticate(string(req.args[len(req.args)-1])) {
		c.w.ok()
	}
}

// authenticate checks token; on failure it writes the error reply.
func (c *conn) authenticate(token string) bool {
	a, err := c.s.cfg.Cluster.Authenticate(token)
	if err != nil {
		_, required := c.s.cfg.Cluster.Anonymous()
		switch {
		case errors.Is(err, ErrBadToken) && !required:
			c.fail("auth", errorf(prefixErr, "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"))
		case errors.Is(err, ErrBadToken):
			c.fail("auth", prefixWrongPass+" invalid username-password pair or user is disabled.")
		default:
			c.failErr(err)
		}
		return false
	}
	c.authed, c.access = true, a
	if token != "" {
		c.setClient(c.clientName(token))
	}
	return true
}

func cmdSelect(_ context.Context, c *conn, req *request) {
	if string(req.args[1]) != "0" {
		c.fail("syntax", errorf(prefixErr, "DB index is out of range"))
		return
	}
	c.w.ok()
}

// cmdReset returns the connection to its state after connecting: name,
// library, READONLY, protocol and authentication.
func cmdReset(_ context.Context, c *conn, _ *request) {
	c.name, c.libName, c.libVer, c.readonly, c.w.proto = "", "", "", false, 2
	c.anonymous()
	c.w.simple("RESET")
}

// clientSubs are the CLIENT subcommands served, with their arity as Redis
// 7.2 checks it. Any other (Redis 7.2's KILL, LIST, PAUSE, TRACKING..., or
// one Redis 7.2 does not know, as the MAINT_NOTIFICATIONS newer redis-py sends) is
// answered as Redis 7.2 answers one it does not know.
var clientSubs = map[string]int{
	"setname": 3, "getname": 2, "id": 2, "info": 2, "setinfo": 4, "no-evict": 3, "no-touch": 3, "help": 2,
}

// clientHelp is CLIENT HELP: Redis 7.2's lines for the subcommands served.
var clientHelp = []string{
	"CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"GETNAME",
	"    Return the name of the current connection.",
	"ID",
	"    Return the ID of the current connection.",
	"INFO",
	"    Return information about the current client connection.",
	"NO-EVICT (ON|OFF)",
	"    Protect current client connection from eviction.",
	"NO-TOUCH (ON|OFF)",
	"    Will not touch LRU/LFU stats when this mode is on.",
	"SETINFO <option> <value>",
	"    Set client meta attr. Options are:",
	"    * LIB-NAME: the client lib name.",
	"    * LIB-VER: the client lib version.",
	"SETNAME <name>",
	"    Assign the name <name> to the current connection.",
	"HELP",
	"    Prints this help.",
}

// cmdClient answers CLIENT SETNAME, GETNAME, ID, INFO, SETINFO, HELP and
// NO-EVICT / NO-TOUCH (accepted: they change nothing here), with Redis
// 7.2's errors.
func cmdClient(_ context.Context, c *conn, req *request) {
	sub, ok := c.subcommand(req, "client", clientSubs)
	if !ok {
		return
	}
	switch sub {
	case "setname":
		if strings.ContainsAny(string(req.args[2]), " \n\r") {
			c.fail("syntax", errorf(prefixErr, "Client names cannot contain spaces, newlines or special characters."))
			return
		}
		c.name = string(req.args[2])
		c.w.ok()
	case "getname":
		if c.name == "" {
			c.w.null()
		} else {
			c.w.bulkString(c.name)
		}
	case "id":
		c.w.int(c.id)
	case "info":
		c.w.bulkString(c.info() + "\n")
	case "setinfo":
		c.clientSetInfo(req)
	case "no-evict", "no-touch":
		if on := lower(req.args[2]); on != "on" && on != "off" {
			c.fail("syntax", errorf(prefixErr, "syntax error"))
			return
		}
		c.w.ok()
	case "help":
		c.help(clientHelp)
	}
}

// clientSetInfo answers CLIENT SETINFO LIB-NAME|LIB-VER value.
func (c *conn) clientSetInfo(req *request) {
	switch lower(req.args[2]) {
	case "lib-name":
		c.libName = string(req.args[3])
	case "lib-ver":
		c.libVer = string(req.args[3])
	default:
		c.fail("syntax", errorf(prefixErr, "Unrecognized option '%s'", clip(req.args[2])))
		return
	}
	c.w.ok()
}

// info is the connection's CLIENT INFO / CLIENT LIST line, with Redis
// 7.2's fields in its order (redis-py's client_info() reads qbuf, obl,
// oll, omem and tot-mem as integers and fails without them); the buffer
// figures Redis reports are 0 but rbs, the read buffer's size. A Unix
// socket's client is "path:0" with flag U, as Redis reports it.
func (c *conn) info() string {
	addr, laddr, flags := c.nc.RemoteAddr().String(), c.nc.LocalAddr().String(), "N"
	if c.unix() {
		addr, laddr, flags = laddr+":0", laddr+":0", "U"
	}
	return fmt.Sprintf("id=%d addr=%s laddr=%s fd=-1 name=%s age=%d idle=0 flags=%s db=0 sub=0 psub=0 ssub=0 multi=-1 "+
		"qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=%d rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd=%s user=default "+
		"redir=-1 resp=%d lib-name=%s lib-ver=%s",
		c.id, addr, laddr, c.name, int(time.Since(c.created).Seconds()), flags, readBuffer, c.lastCmd,
		c.w.proto, c.libName, c.libVer)
}
