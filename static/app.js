// Small behaviours htmx does not cover. No inline scripts: the CSP forbids them.
"use strict";
