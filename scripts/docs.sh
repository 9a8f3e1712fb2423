#!/usr/bin/env bash
# The documentation site: docs/*.md (MyST Markdown) built by Sphinx with the Furo theme into
# build/site, strictly: any warning fails (a link to a page or heading that does not exist, a page
# in no table of contents, a bad directive). Sphinx, MyST and Furo are pinned in versions.env and
# installed into their own venv (build/docs-venv), so they never touch the Python mpirl embeds.
#   scripts/docs.sh                 build (what CI runs: ctest -R docs.site)
#   scripts/docs.sh serve [PORT]    build, then serve build/site on http://localhost:PORT (8000)
#   scripts/docs.sh screenshot PNG  build, then a headless Chromium picture of the front page
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=versions.env
source "$root/scripts/versions.env"
case "${1:-}" in
  ""|serve|screenshot) ;;
  *) echo "scripts/docs.sh: unknown command '$1' (none to build; serve [PORT]; screenshot PNG)" >&2; exit 2 ;;
esac
venv="${MPIRL_DOCS_VENV:-$root/build/docs-venv}"
pins="sphinx==$SPHINX_VERSION myst-parser==$MYST_PARSER_VERSION furo==$FURO_VERSION"
if [ ! -x "$venv/bin/sphinx-build" ] || [ "$(cat "$venv/pins" 2>/dev/null)" != "$pins" ]; then
  echo "[docs] installing $pins into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  # shellcheck disable=SC2086
  "$venv/bin/python" -m pip install -q $pins
  echo "$pins" > "$venv/pins"
fi
site="$root/build/site"
# -E: read every page again, so a warning in an unchanged page is never hidden by the cache.
"$venv/bin/sphinx-build" -E -W --keep-going -n -q -b html -d "$root/build/site-doctrees" \
  "$root/docs" "$site"
pages=$(find "$site" -maxdepth 1 -name '*.html' ! -name genindex.html ! -name search.html | wc -l)
echo "[docs] site: $site/index.html ($pages pages)"
case "${1:-}" in
  serve) exec "$venv/bin/python" -m http.server --directory "$site" "${2:-8000}" ;;
  screenshot)
    png="${2:?screenshot needs a PNG path}"
    command -v chromium >/dev/null || { echo "[docs] screenshot needs chromium (apt-get install chromium)" >&2; exit 2; }
    chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,900 \
      --screenshot="$png" "file://$site/index.html" 2>/dev/null
    echo "[docs] front page: $png" ;;
esac
