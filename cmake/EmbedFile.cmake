# shard_embed_file(INPUT OUTPUT SYMBOL): turns a text file into a C source
# defining `const char SYMBOL[]` (NUL-terminated) and `const size_t SYMBOL_len`,
# regenerated when INPUT changes. Used to embed the IRDL dialect in binaries.
function(shard_embed_file input output symbol)
  add_custom_command(
    OUTPUT ${output}
    COMMAND ${CMAKE_COMMAND} -DINPUT=${input} -DOUTPUT=${output} -DSYMBOL=${symbol}
            -P ${PROJECT_SOURCE_DIR}/cmake/EmbedFileScript.cmake
    DEPENDS ${input} ${PROJECT_SOURCE_DIR}/cmake/EmbedFileScript.cmake
    COMMENT "Embedding ${input}"
    VERBATIM)
endfunction()
