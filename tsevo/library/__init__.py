"""Tools, stages, the library chain, the primitives catalog, the sandbox and calibration trees."""
