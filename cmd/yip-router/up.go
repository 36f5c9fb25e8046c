package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/internal/sdnotify"
	"github.com/yip-router/yip-router/router"
)

func newLogger(level, format string, w io.Writer) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	ec := zap.NewProductionEncoderConfig()
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	var enc zapcore.Encoder
	switch format {
	case "console":
		ec.EncodeLevel = zapcore.CapitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	case "json":
		enc = zapcore.NewJSONEncoder(ec)
	default:
		return nil, fmt.Errorf("--log-format %q: want console or json", format)
	}
	if toJournal(w) {
		if format == "console" {
			// The journal stamps each line itself; JSON keeps its
			// "ts" for whatever parses the message.
			ec.TimeKey = ""
			enc = zapcore.NewConsoleEncoder(ec)
		}
		return zap.New(&priorityCore{lvl, enc, zapcore.AddSync(w)}), nil
	}
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(w), lvl)), nil
}

// shardsFlag reads --shards auto|N: nil when it is not given (the config's
// Shards hold).
func shardsFlag(s string) (*config.Shards, error) {
	if s == "" {
		return nil, nil
	}
	v, err := config.ParseShards(s)
	if err != nil {
		return nil, fmt.Errorf("--shards %w", err)
	}
	return &v, nil
}

func runUp(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flagSet("up", stderr)
	conf := fs.String("c", "", "configuration file (required)")
	shards := fs.String("shards", "", "auto (one per physical core of the CPU affinity mask) or N (first N CPUs of the mask); overrides the config's Shards")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	format := fs.String("log-format", "console", "console or json")
	name := fs.String("name", "", "interface name; overrides the config's Name (the systemd unit passes its instance name)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *conf == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: yip-router up -c FILE [--name IFNAME] [--shards auto|N] [--log-level L] [--log-format console|json]")
		return 2
	}
	log, err := newLogger(*level, *format, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "yip-router up:", err)
		return 2
	}
	defer log.Sync()
	// From here every error that stops the router goes through the log,
	// in its format: a pipeline reading JSON gets JSON to the end.
	fail := func(err error) int {
		log.Error("yip-router up: " + err.Error())
		return 1
	}
	setGCPercent()
	opts := router.Options{Log: log}
	if opts.Shards, err = shardsFlag(*shards); err != nil {
		log.Error("yip-router up: " + err.Error())
		return 2
	}
	cfg, err := config.Load(*conf)
	if err != nil {
		return fail(fmt.Errorf("configuration errors:\n%w", err))
	}
	if *name != "" {
		if err := config.CheckInterfaceName(*name); err != nil {
			log.Error("yip-router up: --name: " + err.Error())
			return 2
		}
		if file := cfg.Interface.Name; file != *name && file != config.DefaultName {
			log.Warn("the interface is named by --name (the systemd unit's instance), not by the file's Name",
				zap.String("name", *name), zap.String("file_name", file))
		}
		cfg.Interface.Name = *name
	}
	warned := map[string]bool{}
	warnConfig := func(c *config.Config) {
		for _, w := range c.Warnings {
			log.Warn("configuration: " + w.Error())
		}
		for _, f := range c.ExposedSecretFiles() {
			if !warned[f] {
				warned[f] = true
				log.Warn("key file is readable by group or others; chmod 600 it", zap.String("file", f))
			}
		}
		if f := c.WritableHookFile(); f != "" && !warned[f] {
			warned[f] = true
			log.Warn("the config's PreUp/PostUp/PreDown/PostDown commands run as this router's user, and someone else may change them: make the file root's and chmod go-w it", zap.String("file", f))
		}
	}
	warnConfig(cfg)
	if os.Geteuid() != 0 {
		log.Warn("not running as root: creating the TUN device needs CAP_NET_ADMIN")
	}
	r, err := router.New(cfg, opts)
	if err != nil {
		return fail(err)
	}
	sock := router.SocketPath(r.Name())
	if err := r.ServeControl(sock); err != nil {
		r.Close()
		return fail(err)
	}
	if _, err := router.StartMetrics(r, cfg, log); err != nil {
		r.Close()
		return fail(err)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := r.Start(); err != nil { // PostUp failed: as wg-quick, no PreDown or PostDown
		r.Close()
		return fail(err)
	}
	log.Info("control socket", zap.String("path", sock))
	notify := func(f func() (bool, error)) {
		if _, err := f(); err != nil {
			log.Warn("telling systemd", zap.Error(err))
		}
	}
	// The interface, its addresses and routes, and the sockets are up:
	// units ordered after this one (Type=notify) may start.
	notify(sdnotify.Ready)
	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				notify(sdnotify.Reloading)
				nc, err := config.Load(*conf)
				if err == nil && *name != "" {
					nc.Interface.Name = *name
				}
				var restart []string
				if err == nil {
					warnConfig(nc)
					restart, err = r.Reload(nc)
				}
				switch {
				case errors.Is(err, router.ErrReloadPartial):
					log.Error("reload failed after applying part of the new configuration", zap.Error(err))
				case err != nil:
					log.Error("reload failed; keeping the running configuration", zap.Error(err))
				}
				if len(restart) > 0 {
					log.Warn("reload: these changed settings need a restart; still running with the old values", zap.Strings("settings", restart))
				}
				notify(sdnotify.Ready)
				continue
			}
			log.Info("shutting down", zap.Stringer("signal", sig))
			notify(sdnotify.Stopping)
			r.Close()
			return 0
		case err, ok := <-r.Errors():
			if ok && err != nil {
				log.Error("shard failed", zap.Error(err))
				notify(sdnotify.Stopping)
				r.Close()
				return 1
			}
		}
	}
}

var errNoRouters = errors.New("no yip-router is running in this network namespace (no control socket of it in " + router.RunDir + "; show --all-namespaces lists every namespace's)")

// gcPercent is the router's GOGC unless the environment sets one. Most of
// its heap is buffers allocated once at start (packet pool, receive and
// coalescing buffers: tens of MiB, mostly untouched while idle), and the
// data path allocates nothing, so only the control plane and refused
// floods make garbage. With Go's default of 100 that garbage could grow
// as large as the buffers before a collection (RSS +54 MiB under a
// handshake flood); at 25 it stays near a quarter of them, and
// collections are still rare because little is allocated.
const gcPercent = 25

func setGCPercent() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
}
