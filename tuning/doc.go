// Package tuning holds host-tuning files; its tests check them.
package tuning
