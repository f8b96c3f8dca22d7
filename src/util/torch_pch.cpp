// Anchor translation unit for the shared precompiled header (see cmake/SparsevitToolchain.cmake).
