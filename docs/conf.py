# Sphinx configuration of the documentation site (scripts/docs.sh builds it into build/site with
# -W -n: any warning, such as a link to a page or heading that does not exist or a page left out of
# every table of contents, fails the build). Pages are Markdown (MyST), readable on their own.
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import config_reference  # noqa: E402
from sphinx.util import logging  # noqa: E402

logger = logging.getLogger(__name__)

project = "mpirl"
author = "the mpirl developers"
copyright = "2026, the mpirl developers"
extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
myst_heading_anchors = 4          # [text](page.md#a-heading) links are checked like page links
myst_enable_extensions = ["colon_fence"]
nitpicky = True
html_theme = "furo"
html_title = "mpirl"
html_static_path = []
html_show_sourcelink = False
pygments_style = "friendly"
smartquotes = False              # "" and '...' in the text are TOML and shell, not prose

CONFIG_MARKER = "<!-- config-reference -->"


def _config_reference(app, docname, source):
    """configuration.md's key reference comes from configs/default.toml at build time."""
    if CONFIG_MARKER in source[0]:
        try:
            table = config_reference.markdown()
        except ValueError as e:  # a key without a comment, or a line the generator cannot read
            logger.warning("configuration reference: %s", e, location=docname)
            table = "(the configuration reference could not be generated: see the build log)"
        source[0] = source[0].replace(CONFIG_MARKER, table)


def setup(app):
    # scripts/docs.sh builds with -E (every page read again), so a changed default.toml is always
    # seen without tracking it as an input of configuration.md.
    app.connect("source-read", _config_reference)
