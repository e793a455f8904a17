# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# Sphinx configuration of the collection's docs site (`make docs`), from `antsibull-docs sphinx-init --use-current`.
# No intersphinx: docs.python.org and docs.ansible.com are not reachable from the machines that build it, so the
# few references antsibull-docs makes into Ansible's own docs (common return values, configuration settings,
# cache plugin environment variables) are left unresolved (`suppress_warnings` below); every other warning fails
# the build (`-W` in docs/build.sh).

project = 'symphony.cluster'
copyright = 'symphony.cluster contributors'
title = 'symphony.cluster documentation'
html_short_title = 'symphony.cluster'

extensions = ['sphinx.ext.autodoc', 'sphinx_antsibull_ext']

pygments_style = 'ansible'
highlight_language = 'YAML+Jinja'

html_theme = 'sphinx_ansible_theme'
html_show_sphinx = False
display_version = False
html_use_smartypants = True
html_use_modindex = False
html_use_index = False
html_copy_source = False

default_role = 'any'
nitpicky = True
# The targets of these live in Ansible's core docs (intersphinx, unreachable offline).
suppress_warnings = ['ref.ref', 'ref.envvar']
