// expected-error-re @+010 {{a{{(b|c){2,3}\1[[:alpha:]]}}x{{$*}}}}
