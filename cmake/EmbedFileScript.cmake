# Script mode helper of shard_embed_file: writes INPUT's bytes as a C array.
file(READ ${INPUT} hex HEX)
string(LENGTH "${hex}" nhex)
math(EXPR nbytes "${nhex} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" body "${body}")
file(WRITE ${OUTPUT} "/* Generated from ${INPUT}; do not edit. */\n#include <stddef.h>\n"
  "const char ${SYMBOL}[] = {\n${body}0x00};\nconst size_t ${SYMBOL}_len = ${nbytes};\n")
