// Package packaging holds what `make deb` packs the .deb with: the nfpm
// configuration, the maintainer scripts, the Debian copyright file and the
// lintian overrides, and the scripts that make the package's version
// (deb-version) and changelog. Its tests run deb-version and, under
// `make test` (YIP_DEB), unpack the package and run what it installs.
package packaging
