/* The fleet page (api/fleet-page.ts). */
"use strict";
