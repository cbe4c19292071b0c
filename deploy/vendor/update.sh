#!/usr/bin/env bash
# Re-vendor the explorer's chart library from the npm registry at a pinned version:
#   deploy/vendor/update.sh 4.6.2
# Writes the file, its licence and VENDORED.json (the tarball's and the file's sha256). Run by a
# person when upgrading, never by a build or a test: the package ships the files.
set -euo pipefail
version="${1:?usage: update.sh VERSION}"
here="$(cd "$(dirname "$0")/../.." && pwd)"
dest="$here/saber_assets/site/explorer_static/vendor"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
url="https://registry.npmjs.org/chart.js/-/chart.js-${version}.tgz"
curl -fsS -o "$tmp/chart.tgz" "$url"
tar -xzf "$tmp/chart.tgz" -C "$tmp" package/dist/chart.umd.min.js package/LICENSE.md
cp "$tmp/package/dist/chart.umd.min.js" "$dest/chart.umd.min.js"
cp "$tmp/package/LICENSE.md" "$dest/chart.js-LICENSE.md"
python3 - "$dest/VENDORED.json" "$version" "$url" "$(sha256sum "$tmp/chart.tgz" | cut -d' ' -f1)" \
  "$(sha256sum "$dest/chart.umd.min.js" | cut -d' ' -f1)" <<'PY'
import json, sys
path, version, url, tar_sha, sha = sys.argv[1:]
record = json.load(open(path))
record["files"]["chart.umd.min.js"].update(
    version=version, tarball=url, tarball_sha256=tar_sha, sha256=sha)
json.dump(record, open(path, "w"), indent=2)
open(path, "a").write("\n")
PY
echo "vendored chart.js $version"
