"""The lab: benchmarks, load tests, simulations, fits and studies. The product never imports it
(an import contract); a production install does not ship it; its commands run from a checkout."""
