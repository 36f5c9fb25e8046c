package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/internal/sdnotify"
	"github.com/yip-router/yip-router/router"
)

// newLogger makes the router's logger; left (if not nil) counts the lines
// its sampling leaves out.
func newLogger(level, format string, w io.Writer, left *atomic.Uint64) (*zap.Logger, error) {
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
		return zap.New(sampled(&priorityCore{lvl, enc, zapcore.AddSync(w)}, left)), nil
	}
	return zap.New(sampled(zapcore.NewCore(enc, zapcore.AddSync(w), lvl), left)), nil
}

// Log sampling: of the debug and info entries with the same level and
// message in one second, the first logFirst are written and then every
// logThereafter-th. A hub that 10,000 peers handshake with at once (a
// restart) would else write 10,000 "session established" lines in a few
// seconds, each a write(2) on the handshake path, more than journald
// keeps (it drops what exceeds its own rate limit anyway); `show` has
// every session, and yip_log_lines_sampled_total counts what was left out.
// Warnings and errors are never sampled: each names what an operator has
// to act on (a peer whose endpoint does not resolve).
const (
	logFirst      = 100
	logThereafter = 100
)

func sampled(c zapcore.Core, left *atomic.Uint64) zapcore.Core {
	var opts []zapcore.SamplerOption
	if left != nil {
		opts = append(opts, zapcore.SamplerHook(func(_ zapcore.Entry, d zapcore.SamplingDecision) {
			if d&zapcore.LogDropped != 0 {
				left.Add(1)
			}
		}))
	}
	return zapcore.NewTee(
		zapcore.NewSamplerWithOptions(levels{c, zapcore.DebugLevel, zapcore.WarnLevel}, time.Second, logFirst, logThereafter, opts...),
		levels{c, zapcore.WarnLevel, zapcore.FatalLevel + 1})
}

// levels passes on only the entries of c whose level is in [from, to).
type levels struct {
	zapcore.Core
	from, to zapcore.Level
}

func (l levels) Enabled(lvl zapcore.Level) bool {
	return lvl >= l.from && lvl < l.to && l.Core.Enabled(lvl)
}

func (l levels) With(fields []zapcore.Field) zapcore.Core {
	return levels{l.Core.With(fields), l.from, l.to}
}

func (l levels) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if l.Enabled(e.Level) {
		return ce.AddCore(e, l)
	}
	return ce
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

func upCmd() *cobra.Command {
	var o upOptions
	cmd := &cobra.Command{
		Use:   "up -c FILE [--name IFNAME] [--shards auto|N] [--log-level L] [--log-format console|json]",
		Short: "run the router",
		Long: `Run the router of the configuration file FILE (docs/CONFIG.md) until SIGINT
or SIGTERM. SIGHUP re-reads the file: peer changes and FEC apply without
dropping sessions; changed [Interface] settings are logged and wait for a
restart. The log goes to stderr; under systemd (Type=notify) each line
carries its syslog priority and the router reports readiness and reloads.
Creating the TUN device needs CAP_NET_ADMIN, the eBPF steering CAP_BPF.`,
		Args:              noArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return exit(runUp(o, cmd.ErrOrStderr()))
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.conf, "config", "c", "", "configuration `FILE` (required)")
	f.StringVar(&o.shards, "shards", "", "`auto|N`: auto is one shard per physical core of the CPU affinity mask, N the first N CPUs of the mask; overrides the config's Shards")
	f.StringVar(&o.level, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&o.format, "log-format", "console", "console or json")
	f.StringVar(&o.name, "name", "", "interface name; overrides the config's Name (the systemd unit passes its instance name)")
	_ = cmd.MarkFlagRequired("config")
	_ = cmd.MarkFlagFilename("config", "conf")
	_ = cmd.RegisterFlagCompletionFunc("shards", fixedCompletions("auto"))
	_ = cmd.RegisterFlagCompletionFunc("log-level", fixedCompletions("debug", "info", "warn", "error"))
	_ = cmd.RegisterFlagCompletionFunc("log-format", fixedCompletions("console", "json"))
	_ = cmd.RegisterFlagCompletionFunc("name", cobra.NoFileCompletions)
	return cmd
}

// upOptions are up's flags.
type upOptions struct {
	conf, shards, level, format, name string
}

func runUp(o upOptions, stderr io.Writer) int {
	var left atomic.Uint64
	log, err := newLogger(o.level, o.format, stderr, &left)
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
	if path := os.Getenv(cpuProfileEnv); path != "" {
		stop, err := startCPUProfile(path)
		if err != nil {
			return fail(err)
		}
		defer stop()
		log.Warn("writing a CPU profile of this run (it costs a little CPU); it is complete once the router stopped", zap.String(cpuProfileEnv, path))
	}
	opts := router.Options{Log: log, LogSampled: left.Load}
	if opts.Shards, err = shardsFlag(o.shards); err != nil {
		log.Error("yip-router up: " + err.Error())
		return 2
	}
	cfg, err := config.Load(o.conf)
	if err != nil {
		return fail(fmt.Errorf("configuration errors:\n%w", err))
	}
	if o.name != "" {
		if err := config.CheckInterfaceName(o.name); err != nil {
			log.Error("yip-router up: --name: " + err.Error())
			return 2
		}
		if file := cfg.Interface.Name; file != o.name && file != config.DefaultName {
			log.Warn("the interface is named by --name (the systemd unit's instance), not by the file's Name",
				zap.String("name", o.name), zap.String("file_name", file))
		}
		cfg.Interface.Name = o.name
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
				nc, err := config.Load(o.conf)
				if err == nil && o.name != "" {
					nc.Interface.Name = o.name
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
